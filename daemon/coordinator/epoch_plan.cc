#include "daemon/coordinator/epoch_plan.h"

#include <numeric>
#include <string>
#include <utility>

#include "common/random.h"

namespace ember::daemon {
namespace {

// The salt of the permutation's stream (common/random.h's StreamSeed).
constexpr uint64_t kOrderSalt = 0x632BE59BD9B4E019ULL;

std::string Numbers(uint64_t num_samples, uint32_t batch_size, uint32_t world_size) {
  return "num_samples " + std::to_string(num_samples) + ", batch_size " +
         std::to_string(batch_size) + ", world_size " + std::to_string(world_size);
}

// Appends the end offsets of `count` batches that follow offset `start` and share
// `samples` samples as evenly as possible (the first samples % count get one more).
void ShareEvenly(uint64_t start, uint64_t samples, uint64_t count, std::vector<uint64_t>* out) {
  const uint64_t base = samples / count;
  const uint64_t extra = samples % count;
  for (uint64_t i = 0; i < count; ++i) {
    start += base + (i < extra ? 1 : 0);
    out->push_back(start);
  }
}

}  // namespace

Result<uint64_t> BatchesPerRank(uint64_t num_samples, uint32_t batch_size, uint32_t world_size) {
  if (batch_size == 0 || world_size == 0) {
    return InvalidArgument("epoch plan: batch_size and world_size must be positive (" +
                           Numbers(num_samples, batch_size, world_size) + ")");
  }
  const uint64_t per_step = static_cast<uint64_t>(batch_size) * world_size;
  const uint64_t per_rank = num_samples / per_step + (num_samples % per_step != 0 ? 1 : 0);
  const uint64_t total = per_rank * world_size;
  if (num_samples == 0 || num_samples < total) {
    return InvalidArgument("epoch plan: too few samples to give each rank a batch (" +
                           Numbers(num_samples, batch_size, world_size) + " needs at least " +
                           std::to_string(total == 0 ? world_size : total) + " samples)");
  }
  return per_rank;
}

Result<EpochPlan> MakeEpochPlan(uint64_t num_samples, uint32_t batch_size, uint32_t world_size,
                                uint64_t seed, uint64_t epoch, bool shuffle) {
  EMBER_ASSIGN_OR_RETURN(const uint64_t per_rank,
                         BatchesPerRank(num_samples, batch_size, world_size));
  EpochPlan plan;
  plan.batches_per_rank = per_rank;

  plan.order.resize(num_samples);
  std::iota(plan.order.begin(), plan.order.end(), uint64_t{0});
  if (shuffle) {
    SplitMix64 rng(StreamSeed(seed, epoch, kOrderSalt));
    for (uint64_t i = num_samples - 1; i > 0; --i) {
      std::swap(plan.order[i], plan.order[rng.Below(i + 1)]);
    }
  }

  const uint64_t total = per_rank * world_size;
  const uint64_t full = total - world_size;
  const uint64_t remainder = num_samples - full * batch_size;  // in [1, world * batch]
  plan.batch_starts.reserve(total + 1);
  plan.batch_starts.push_back(0);
  if (remainder >= world_size) {
    for (uint64_t b = 0; b < full; ++b) plan.batch_starts.push_back((b + 1) * batch_size);
    ShareEvenly(full * batch_size, remainder, world_size, &plan.batch_starts);
  } else {
    ShareEvenly(0, num_samples, total, &plan.batch_starts);
  }
  return plan;
}

}  // namespace ember::daemon
