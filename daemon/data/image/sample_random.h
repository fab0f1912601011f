// The image pipeline's per-sample randomness. Every random choice of a sample (crops,
// flips, plugin steps) derives only from (seed, epoch, sample id): the same triple gives
// the same bytes on any thread and in any order, and another epoch gives other choices.
#ifndef EMBER_DAEMON_DATA_IMAGE_SAMPLE_RANDOM_H_
#define EMBER_DAEMON_DATA_IMAGE_SAMPLE_RANDOM_H_

#include <cstddef>
#include <cstdint>

#include "common/random.h"

namespace ember::daemon {

// The generator the geometric steps of sample `id` draw from, in step order.
SplitMix64 SampleRandom(uint64_t seed, uint64_t epoch, uint64_t id);

// The random value the plugin step at `step_index` gets for sample `id`: unrelated to
// SampleRandom's stream and to the other steps' values.
uint64_t PluginStepRandom(uint64_t seed, uint64_t epoch, uint64_t id, size_t step_index);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_IMAGE_SAMPLE_RANDOM_H_
