#include "daemon/coordinator/epoch_plan.h"

#include <numeric>
#include <string>
#include <utility>

namespace ember::daemon {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a tiny PRNG whose output is fully specified, so
// every daemon computes the same permutation whatever its standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}

  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return Mix(state_);
  }

  // Uniform in [0, bound), bound > 0, without modulo bias (Lemire 2019: multiply, then
  // reject the few low products that would over-represent some outputs).
  uint64_t Below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// Distinct (seed, epoch) pairs give unrelated streams: the epoch is mixed before it is
// combined, so seed s epoch e+1 is not seed s+1 epoch e.
uint64_t StreamSeed(uint64_t seed, uint64_t epoch) {
  return SplitMix64::Mix(seed ^ SplitMix64::Mix(epoch + 0x632BE59BD9B4E019ULL));
}

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
    SplitMix64 rng(StreamSeed(seed, epoch));
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
