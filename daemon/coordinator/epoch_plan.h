// EpochPlan: how one epoch of a job's dataset is cut into global steps and batches.
//
// The plan is a pure function of (num_samples, batch_size, world_size, seed, epoch,
// shuffle, start): every daemon of every node and every run computes the same one.
//   - The order is a Fisher-Yates permutation of 0..num_samples-1 driven by a SplitMix64
//     stream seeded from (seed, epoch) with unbiased bounded draws (common/random.h; not
//     std::shuffle, whose output differs between standard libraries). Without shuffle:
//     the identity. By shards (a ShuffleShape with blocks): see ShuffleShape. The
//     order does not depend on batch_size, world_size or start.
//   - Positions [start, num_samples) of the order are served (start > 0: an epoch resumed
//     from a checkpoint; the positions before it were consumed). They are cut into global
//     steps of G = batch_size x world_size consecutive positions; rank r's batch of a step
//     is slice r of it (the step's positions shared as evenly as possible, in rank order,
//     sizes differing by at most one). So runs with the same G see the same samples in the
//     same steps whatever their world size.
//   - Tail rule: with R = num_samples - start positions, there are ceil(R / G) steps; all
//     are full except, when r = R mod G is not 0, the end: if r >= G / 2 (or there is only
//     one step) the last step has r positions; otherwise the last two steps share G + r
//     positions as evenly as possible (the first gets the extra one). Every rank gets one
//     batch per step, so the same number of batches; every position is served exactly
//     once; no batch exceeds batch_size.
// kInvalidArgument, naming the numbers, if batch_size or world_size is 0, start >=
// num_samples, or a step has fewer positions than there are ranks (too few samples, or
// batch_size 1 with a tail that does not divide among the ranks).
#ifndef EMBER_DAEMON_COORDINATOR_EPOCH_PLAN_H_
#define EMBER_DAEMON_COORDINATOR_EPOCH_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "ember/status.h"

namespace ember::daemon {

// Positions [begin, end) of the epoch's order.
struct PositionRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
};

// The step boundaries only (no permutation): cheap, for validating a request and sizing
// rings. step_starts[s] is the first position of step s; back() is num_samples.
struct StepLayout {
  std::vector<uint64_t> step_starts;  // size steps + 1
  uint32_t world_size = 1;

  uint64_t steps() const { return step_starts.empty() ? 0 : step_starts.size() - 1; }
  // Rank `rank`'s batch of step `step` (both in range).
  PositionRange Slice(uint64_t step, uint32_t rank) const;
};

Result<StepLayout> MakeStepLayout(uint64_t num_samples, uint32_t batch_size, uint32_t world_size,
                                  uint64_t start = 0);

// How a shuffled order mixes the samples: over the whole set (no blocks, the default),
// or by shards, for data read from remote storage (a dataset registered with
// `shuffle: shards`), as Mosaic Streaming's py1b: the set's blocks (its shards: runs of
// consecutive sample ids) are permuted, and then the samples of each window of `window`
// consecutive blocks of that permutation are shuffled among themselves. So an epoch reads
// about `window` shards at a time, each once, and a cache far smaller than the set serves
// it. The blocks are the dataset's, which every node has: jobs and the wire carry their
// digest only.
struct ShuffleShape {
  // The first sample id of each block, ascending from 0, then num_samples. Null: none.
  std::shared_ptr<const std::vector<uint64_t>> starts;
  uint64_t digest = 0;  // of `starts` (BlocksDigest); 0: shuffled over the whole set
  uint32_t window = 1;  // blocks shuffled together (>= 1)

  // By shards whose first sample ids are `starts` (then the sample count).
  static ShuffleShape ByShards(std::vector<uint64_t> starts, uint32_t window);
  bool by_shards() const { return digest != 0; }
  bool operator==(const ShuffleShape& o) const { return digest == o.digest && window == o.window; }
  bool operator!=(const ShuffleShape& o) const { return !(*this == o); }
  bool operator<(const ShuffleShape& o) const {
    return digest != o.digest ? digest < o.digest : window < o.window;
  }
};

// FNV-1a of the starts' little-endian bytes; never 0 for a non-empty list.
uint64_t BlocksDigest(const std::vector<uint64_t>& starts);

// Shuffled by shards, a step's sample ids are grouped by shard before they are cut into
// the ranks' slices: `step_ids` (the step's ids in epoch order) stably sorted by their
// block, in ascending block order. So consecutive ranks (a node's) read a few of the
// window's shards each, not all of them, and each node fetches mostly its own shards;
// still a function of the step alone (the same for any world size with the same global
// batch). Without blocks (or their starts unknown): left as they are.
void GroupByShard(std::vector<uint64_t>& step_ids, const ShuffleShape& shape);

struct EpochPlan {
  std::vector<uint64_t> order;  // sample ids in epoch order (all num_samples of them)
  StepLayout layout;

  uint64_t steps() const { return layout.steps(); }
  PositionRange Slice(uint64_t step, uint32_t rank) const { return layout.Slice(step, rank); }
  const uint64_t* ids(PositionRange range) const { return order.data() + range.begin; }
  // Rank `rank`'s sample ids of step `step`: its slice's, after GroupByShard(shape).
  std::vector<uint64_t> RankIds(uint64_t step, uint32_t rank, const ShuffleShape& shape) const;
};

Result<EpochPlan> MakeEpochPlan(uint64_t num_samples, uint32_t batch_size, uint32_t world_size,
                                uint64_t seed, uint64_t epoch, bool shuffle, uint64_t start = 0,
                                ShuffleShape shape = {});

// The epoch's order alone (EpochPlan::order) into *order, resized to num_samples: the same
// permutation in either width (the 32-bit one needs num_samples <= 2^32).
void MakeEpochOrder(uint64_t num_samples, uint64_t seed, uint64_t epoch, bool shuffle,
                    std::vector<uint64_t>* order, ShuffleShape shape = {});
void MakeEpochOrder(uint64_t num_samples, uint64_t seed, uint64_t epoch, bool shuffle,
                    std::vector<uint32_t>* order, ShuffleShape shape = {});

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_EPOCH_PLAN_H_
