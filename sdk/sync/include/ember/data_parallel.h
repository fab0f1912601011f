// ember::DataParallel: data-parallel training of a torch::nn::Module in the manner of
// PyTorch's DistributedDataParallel. Every rank holds a replica; the constructor gives
// all of them rank 0's parameters and buffers, and every backward pass leaves each
// parameter's gradient averaged over the ranks, so the training loop is unchanged:
//
//   ember::DataParallel ddp(*model, ember::MakeGlooCommunicator(*client, job, rank, world));
//   torch::optim::SGD optimizer(model->parameters(), 0.1);
//   for (...) {
//     optimizer.zero_grad();
//     loss_fn(model->forward(x), y).backward();  // gradients are averaged on return
//     optimizer.step();
//   }
//
// Gradient accumulation without communication, as DDP's no_sync:
//
//   { auto no_sync = ddp.NoSync(); (loss_a / 2).backward(); }
//   (loss_b / 2).backward();  // all-reduces the sum of both micro-batches' gradients
//
// Glossary. Bucket: the gradients of several parameters of one dtype and device, sent
// as one flat buffer. Buckets take parameters in reverse registration order (roughly
// the order in which backward produces their gradients), up to bucket_bytes each; the
// first of each dtype and device only up to first_bucket_bytes, as in DDP, so that
// communication starts early in backward even when the whole model fits in one bucket.
// A bucket's all-reduce is launched from a gradient hook as soon as all its parameters
// have their gradient, so communication overlaps the rest of backward; buckets are
// launched strictly in bucket order, so the ranks' collectives match. When backward
// ends, the remaining buckets are launched, all are waited, averaged and copied into
// the parameters' .grad. How much a launched all-reduce overlaps depends on the
// communicator: Gloo and NCCL run it in the background; the shared-memory one
// (MakeSharedMemoryCommunicator) queues it and runs the queue when backward ends, on
// the training thread, which on a CPU whose cores all compute is the cheaper choice.
//
// Contract: every rank runs the same number of synced backward passes, each through
// at least one parameter of the module; a parameter without a gradient on this rank
// contributes zeros, and one that no rank has a gradient for keeps an undefined grad.
// One synced backward per optimizer step (a second one all-reduces the already averaged
// gradient plus the new one, as plain accumulation into .grad would).
// Buffers are broadcast once, by the constructor, not before every forward.
#ifndef EMBER_DATA_PARALLEL_H_
#define EMBER_DATA_PARALLEL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/nn/module.h>

#include "ember/communicator.h"

namespace ember {

struct DataParallelOptions {
  // A bucket closes once its gradients reach this many bytes (so a parameter larger
  // than this ends a bucket, and may have one of its own). Must be positive.
  int64_t bucket_bytes = 25 * 1024 * 1024;
  // The same for the first bucket of each dtype and device (capped at bucket_bytes).
  // Must be positive.
  int64_t first_bucket_bytes = 1024 * 1024;
};

// Counters since construction.
struct DataParallelStats {
  int64_t synced_backward_passes = 0;
  // Buckets launched from a gradient hook, while backward was still running.
  int64_t buckets_launched_during_backward = 0;
  // Buckets launched once backward had finished (they held a parameter that had no
  // gradient on this rank, or came after such a bucket).
  int64_t buckets_launched_at_end = 0;
  // Time spent once backward had produced its gradients: launching the buckets left,
  // waiting for every all-reduce and averaging into .grad. The communication backward
  // did not hide (an all-reduce still running, a slower rank, the shared-memory queue).
  std::chrono::nanoseconds finish_time{0};
};

// Keeps a reference to `module`, which must outlive this object, and registers hooks on
// the gradient accumulators of its parameters that require grad (removed by the
// destructor); the set of parameters is fixed at construction. Parameters must be dense,
// on the communicator's device type (CPU for Gloo, CUDA for NCCL).
//
// Blocking: the constructor is a collective (all ranks must construct together) and
// blocks until rank 0's state has arrived. backward() returns once all buckets' all-
// reduces have completed, or throws c10::Error from the communicator (a dead or stuck
// peer fails within the communicator's timeout) or if the ranks' layouts differ
// (checked by the constructor, which throws on every rank).
//
// Thread-safety: hooks may run on autograd's threads; they are serialized internally.
// The communicator must not be used by anyone else while a backward pass runs, and the
// object must not be destroyed during one. After backward has thrown, this object and its
// communicator are unusable: later synced backward passes throw.
class DataParallel {
 public:
  DataParallel(torch::nn::Module& module, std::shared_ptr<Communicator> comm,
               DataParallelOptions options = {});
  ~DataParallel();

  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // While alive, backward passes accumulate gradients locally with no communication;
  // the next synced backward all-reduces what has accumulated. Guards may nest; each
  // restores the state it found. Use from the training loop's thread, not during backward.
  class NoSyncGuard {
   public:
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;
    ~NoSyncGuard();

   private:
    friend class DataParallel;
    explicit NoSyncGuard(DataParallel* owner);
    DataParallel* owner_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard NoSync();

  // The buckets in launch order; each lists indices into module.parameters() (as it was
  // at construction), in the order they sit in the bucket.
  std::vector<std::vector<int64_t>> BucketLayout() const;

  DataParallelStats stats() const;

  Communicator& comm();

 private:
  struct State;
  void SetNoSync(bool no_sync, bool* previous);

  std::unique_ptr<State> state_;
};

}  // namespace ember

#endif  // EMBER_DATA_PARALLEL_H_
