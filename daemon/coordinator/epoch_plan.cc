#include "daemon/coordinator/epoch_plan.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "common/fnv1a.h"
#include "common/random.h"

namespace ember::daemon {
namespace {

// The salt of the permutation's stream (common/random.h's StreamSeed).
constexpr uint64_t kOrderSalt = 0x632BE59BD9B4E019ULL;

std::string Numbers(uint64_t num_samples, uint64_t start, uint32_t batch_size,
                    uint32_t world_size) {
  return "num_samples " + std::to_string(num_samples) +
         (start != 0 ? ", start " + std::to_string(start) : std::string()) + ", batch_size " +
         std::to_string(batch_size) + ", world_size " + std::to_string(world_size);
}

// Fisher-Yates over [first, last).
template <typename T>
void Shuffle(T* first, T* last, SplitMix64& rng) {
  for (uint64_t i = static_cast<uint64_t>(last - first); i > 1; --i)
    std::swap(first[i - 1], first[rng.Below(i)]);
}

template <typename T>
void FillOrder(uint64_t num_samples, uint64_t seed, uint64_t epoch, bool shuffle,
               ShuffleShape shape, std::vector<T>* order) {
  order->resize(num_samples);
  std::iota(order->begin(), order->end(), T{0});
  if (!shuffle || num_samples == 0) return;
  SplitMix64 rng(StreamSeed(seed, epoch, kOrderSalt));
  const std::vector<uint64_t>* starts = shape.starts.get();
  if (starts == nullptr || starts->size() < 3 || starts->back() != num_samples) {
    Shuffle(order->data(), order->data() + num_samples, rng);  // over the set (or one block)
    return;
  }
  // By shards: the blocks permuted, their samples laid out in that order, then each
  // window of `window` blocks shuffled within itself.
  const uint64_t blocks = starts->size() - 1;
  std::vector<uint64_t> perm(blocks);
  std::iota(perm.begin(), perm.end(), uint64_t{0});
  Shuffle(perm.data(), perm.data() + blocks, rng);
  uint64_t at = 0;
  const uint64_t window = std::max<uint32_t>(shape.window, 1);
  for (uint64_t b = 0; b < blocks; b += window) {
    const uint64_t window_start = at;
    for (uint64_t w = b; w < std::min(blocks, b + window); ++w)
      for (uint64_t id = (*starts)[perm[w]]; id < (*starts)[perm[w] + 1]; ++id)
        (*order)[at++] = static_cast<T>(id);
    Shuffle(order->data() + window_start, order->data() + at, rng);
  }
}

}  // namespace

ShuffleShape ShuffleShape::ByShards(std::vector<uint64_t> starts, uint32_t window) {
  ShuffleShape shape;
  shape.digest = BlocksDigest(starts);
  shape.starts = std::make_shared<const std::vector<uint64_t>>(std::move(starts));
  shape.window = window;
  return shape;
}

uint64_t BlocksDigest(const std::vector<uint64_t>& starts) {
  if (starts.empty()) return 0;
  uint64_t hash = kFnv1a64Offset;
  for (uint64_t s : starts) hash = Fnv1a64Le(static_cast<int64_t>(s), hash);
  return hash == 0 ? 1 : hash;
}

void GroupByShard(std::vector<uint64_t>& step_ids, const ShuffleShape& shape) {
  if (!shape.by_shards() || shape.starts == nullptr || shape.starts->size() < 3) return;
  const std::vector<uint64_t>& starts = *shape.starts;
  auto block = [&](uint64_t id) { return std::upper_bound(starts.begin(), starts.end(), id) - starts.begin(); };
  std::stable_sort(step_ids.begin(), step_ids.end(),
                   [&](uint64_t a, uint64_t b) { return block(a) < block(b); });
}

std::vector<uint64_t> EpochPlan::RankIds(uint64_t step, uint32_t rank,
                                         const ShuffleShape& shape) const {
  const PositionRange all{layout.step_starts[step], layout.step_starts[step + 1]};
  std::vector<uint64_t> ids(order.begin() + all.begin, order.begin() + all.end);
  GroupByShard(ids, shape);
  const PositionRange slice = Slice(step, rank);
  return std::vector<uint64_t>(ids.begin() + (slice.begin - all.begin),
                               ids.begin() + (slice.end - all.begin));
}

PositionRange StepLayout::Slice(uint64_t step, uint32_t rank) const {
  const uint64_t first = step_starts[step];
  const uint64_t size = step_starts[step + 1] - first;
  const uint64_t base = size / world_size, extra = size % world_size;
  const uint64_t begin = first + base * rank + std::min<uint64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

Result<StepLayout> MakeStepLayout(uint64_t num_samples, uint32_t batch_size, uint32_t world_size,
                                  uint64_t start) {
  const std::string numbers = Numbers(num_samples, start, batch_size, world_size);
  if (batch_size == 0 || world_size == 0)
    return InvalidArgument("epoch plan: batch_size and world_size must be positive (" +
                           numbers + ")");
  if (start >= num_samples)
    return InvalidArgument("epoch plan: no samples left to serve (" + numbers + ")");
  const uint64_t global = static_cast<uint64_t>(batch_size) * world_size;
  const uint64_t remaining = num_samples - start;
  const uint64_t steps = remaining / global + (remaining % global != 0 ? 1 : 0);
  const uint64_t tail = remaining % global;

  StepLayout layout;
  layout.world_size = world_size;
  layout.step_starts.reserve(steps + 1);
  for (uint64_t s = 0; s <= steps; ++s)
    layout.step_starts.push_back(std::min(start + s * global, num_samples));
  if (tail != 0 && tail < global / 2 && steps >= 2) {
    // The last two steps share G + tail positions.
    const uint64_t shared = global + tail;
    layout.step_starts[steps - 1] = layout.step_starts[steps - 2] + shared - shared / 2;
  }
  for (uint64_t s = 0; s < steps; ++s) {
    const uint64_t size = layout.step_starts[s + 1] - layout.step_starts[s];
    if (size < world_size)
      return InvalidArgument("epoch plan: global step " + std::to_string(s) + " has " +
                             std::to_string(size) + " samples for " +
                             std::to_string(world_size) + " ranks (" + numbers +
                             "): too few samples, or use a batch_size of at least 2");
  }
  return layout;
}

Result<EpochPlan> MakeEpochPlan(uint64_t num_samples, uint32_t batch_size, uint32_t world_size,
                                uint64_t seed, uint64_t epoch, bool shuffle, uint64_t start,
                                ShuffleShape shape) {
  EpochPlan plan;
  EMBER_ASSIGN_OR_RETURN(plan.layout, MakeStepLayout(num_samples, batch_size, world_size, start));
  MakeEpochOrder(num_samples, seed, epoch, shuffle, &plan.order, shape);
  return plan;
}

void MakeEpochOrder(uint64_t num_samples, uint64_t seed, uint64_t epoch, bool shuffle,
                    std::vector<uint64_t>* order, ShuffleShape shape) {
  FillOrder(num_samples, seed, epoch, shuffle, shape, order);
}

void MakeEpochOrder(uint64_t num_samples, uint64_t seed, uint64_t epoch, bool shuffle,
                    std::vector<uint32_t>* order, ShuffleShape shape) {
  FillOrder(num_samples, seed, epoch, shuffle, shape, order);
}

}  // namespace ember::daemon
