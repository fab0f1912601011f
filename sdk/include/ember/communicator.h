// ember::Communicator: collective operations across the ranks of a job.
//
// Implementations: Gloo on CPU tensors (ember/model_sync.h, MakeGlooCommunicator) and
// NCCL on CUDA tensors (ember/nccl_communicator.h). Every rank of the group must issue
// the same collectives in the same order with tensors of the same count, shapes and
// dtypes.
//
// Calls block until the collective has completed on this rank. Errors throw c10::Error
// (TORCH_CHECK) with a message that names the operation, this rank and the cause; a peer
// that died or stopped answering makes the call fail within the communicator's timeout,
// never hang. After an error the communicator is unusable. One thread at a time.
#ifndef EMBER_COMMUNICATOR_H_
#define EMBER_COMMUNICATOR_H_

#include <vector>

#include <torch/torch.h>

namespace ember {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Replaces every tensor, in place, by its element-wise sum over all ranks. Tensors may
  // differ in shape and dtype from one another; autograd does not see the change.
  virtual void AllReduceSum(std::vector<torch::Tensor>& tensors) = 0;

  // Replaces every tensor, in place, by rank `root`'s tensor.
  virtual void Broadcast(std::vector<torch::Tensor>& tensors, int root) = 0;
};

}  // namespace ember

#endif  // EMBER_COMMUNICATOR_H_
