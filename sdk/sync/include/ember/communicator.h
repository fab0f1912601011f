// ember::Communicator: collective operations across the ranks of a job.
//
// Implementations: Gloo on CPU tensors (ember/model_sync.h, MakeGlooCommunicator) and
// NCCL on CUDA tensors (ember/nccl_communicator.h). Every rank of the group must issue
// the same collectives in the same order with tensors of the same count, shapes and
// dtypes; an asynchronous collective counts from the call that launches it, not from
// its Wait.
//
// Blocking calls return once the collective has completed on this rank. Errors throw
// c10::Error (TORCH_CHECK) with a message that names the operation, this rank and the
// cause; a peer that died or stopped answering makes the call (or Wait) fail within the
// communicator's timeout, never hang. After an error the communicator is unusable.
// One thread at a time: calls, including PendingCollective::Wait, must not overlap.
#ifndef EMBER_COMMUNICATOR_H_
#define EMBER_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include <torch/types.h>

namespace ember {

// A collective launched by Communicator::AllReduceSumAsync. Until Wait has returned,
// its tensors must be neither read nor written. Dropping it without Wait leaves the
// tensors' contents unspecified (the collective still completes in the background).
// It must not outlive its communicator.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;

  // Blocks until the collective has completed on this rank and its results are in the
  // tensors. Throws c10::Error if it failed or did not complete within the
  // communicator's timeout counted from this call; the communicator is then unusable.
  // Calling it again after it returned is a no-op; after it threw, it throws again.
  virtual void Wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Replaces every tensor, in place, by its element-wise sum over all ranks. Tensors may
  // differ in shape and dtype from one another; autograd does not see the change.
  virtual void AllReduceSum(std::vector<torch::Tensor>& tensors) {
    AllReduceSumAsync(tensors)->Wait();
  }

  // Launches AllReduceSum of `tensors` and returns without waiting for it; the result
  // is in the tensors once Wait has returned. Argument errors and an earlier failure
  // throw c10::Error here. Several collectives may be in flight at once and be waited
  // in any order.
  virtual std::shared_ptr<PendingCollective> AllReduceSumAsync(
      std::vector<torch::Tensor>& tensors) = 0;

  // Replaces every tensor, in place, by rank `root`'s tensor.
  virtual void Broadcast(std::vector<torch::Tensor>& tensors, int root) = 0;
};

}  // namespace ember

#endif  // EMBER_COMMUNICATOR_H_
