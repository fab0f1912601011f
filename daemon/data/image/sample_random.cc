#include "daemon/data/image/sample_random.h"

namespace ember::daemon {

namespace {

constexpr uint64_t kPluginSalt = 0x706c7567696e5f31ULL;  // "plugin_1"

}  // namespace

SplitMix64 SampleRandom(uint64_t seed, uint64_t epoch, uint64_t id) {
  return SplitMix64(ChainSeed({seed, epoch, id}));
}

uint64_t PluginStepRandom(uint64_t seed, uint64_t epoch, uint64_t id, size_t step_index) {
  return ChainSeed({seed ^ kPluginSalt, epoch, id, step_index});
}

}  // namespace ember::daemon
