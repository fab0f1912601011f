// The example trainer's checkpoint (--checkpoint DIR): the model, the optimizer, the
// loader state and the trainer's counters in one file, DIR/checkpoint.pt (a LibTorch
// archive), replaced atomically, so that a run killed at any point leaves the previous
// checkpoint or the new one, whole. Only the latest is kept.
//
// In synchronous data-parallel training every rank holds the same model, optimizer and
// loader state after an optimizer step, so one rank (rank 0) writes and every rank of the
// next run, on any world size, reads the same file.
#ifndef EMBER_SDK_EXAMPLES_TRAIN_CHECKPOINT_H_
#define EMBER_SDK_EXAMPLES_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "common/env.h"
#include "ember/loader_state.h"
#include "ember/status.h"

namespace ember::examples {

// Where a training job stands after a step.
struct TrainCheckpoint {
  LoaderState loader;          // loader.epoch is the epoch in progress
  uint64_t step_in_epoch = 0;  // global steps of loader.epoch done (counted across resumes)
  uint64_t total_steps = 0;    // global steps of the whole training done
  uint32_t world_size = 0;     // of the run that wrote it
  uint32_t batch_size = 0;     // per rank, of that run
};

// DIR/checkpoint.pt
std::string CheckpointPath(const std::string& dir);

// Writes `net`, `optimizer` and `checkpoint` to CheckpointPath(dir) through
// Env::WriteFileAtomic (a temporary file beside it, fsync, rename, fsync of the
// directory), creating `dir` if needed. Blocks on the disk. Errors name the file.
Status SaveCheckpoint(Env& env, const std::string& dir, const torch::nn::Module& net,
                      const torch::optim::Optimizer& optimizer,
                      const TrainCheckpoint& checkpoint);

// Reads CheckpointPath(dir) into `net` and `optimizer` (built as when it was written) and
// returns its counters; nullopt if there is none. kDataLoss "<path>: ..." if the file is not such a checkpoint
// (LibTorch's reason, or the field that is wrong); the Env's errors otherwise.
Result<std::optional<TrainCheckpoint>> LoadCheckpoint(Env& env, const std::string& dir,
                                                      torch::nn::Module& net,
                                                      torch::optim::Optimizer& optimizer);

// Removes the temporary files that a writer killed in SaveCheckpoint left in `dir`. For
// the writing rank, before it first writes. Errors name the file.
Status RemoveCheckpointLeftovers(Env& env, const std::string& dir);

}  // namespace ember::examples

#endif  // EMBER_SDK_EXAMPLES_TRAIN_CHECKPOINT_H_
