// EpochPlan: how one epoch of a job's dataset is cut into batches.
//
// The plan is a pure function of (num_samples, batch_size, world_size, seed, epoch,
// shuffle): every daemon and every run computes the same one.
//   - The sample order is a Fisher-Yates permutation of 0..num_samples-1 driven by a
//     SplitMix64 stream seeded from (seed, epoch) with unbiased bounded draws
//     (common/random.h; not std::shuffle, whose output differs between standard
//     libraries). Without shuffle: identity.
//   - total batches T = world_size * ceil(num_samples / (batch_size * world_size)), so
//     every rank gets exactly T / world_size batches.
//   - Batches are consecutive runs of the order. All are full (batch_size samples) except
//     the last world_size ones, which share the remainder as evenly as possible (sizes
//     differ by at most one). If that would leave one empty, all T batches share the
//     samples as evenly as possible instead.
//   - Every sample is in exactly one batch.
// kInvalidArgument if batch_size or world_size is 0, or num_samples < T (too few
// samples to give each rank a batch), naming the numbers.
#ifndef EMBER_DAEMON_COORDINATOR_EPOCH_PLAN_H_
#define EMBER_DAEMON_COORDINATOR_EPOCH_PLAN_H_

#include <cstdint>
#include <vector>

#include "ember/status.h"

namespace ember::daemon {

struct EpochPlan {
  std::vector<uint64_t> order;          // sample ids in epoch order
  std::vector<uint64_t> batch_starts;   // batch b = order[batch_starts[b] .. batch_starts[b+1])
                                        // (size T + 1)
  uint64_t batches_per_rank = 0;

  uint64_t num_batches() const { return batch_starts.empty() ? 0 : batch_starts.size() - 1; }
  uint64_t batch_size(uint64_t b) const { return batch_starts[b + 1] - batch_starts[b]; }
  const uint64_t* batch_ids(uint64_t b) const { return order.data() + batch_starts[b]; }
};

// Only the counts (no permutation): cheap, for validating a request.
Result<uint64_t> BatchesPerRank(uint64_t num_samples, uint32_t batch_size, uint32_t world_size);

Result<EpochPlan> MakeEpochPlan(uint64_t num_samples, uint32_t batch_size, uint32_t world_size,
                                uint64_t seed, uint64_t epoch, bool shuffle);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_EPOCH_PLAN_H_
