#include "daemon/data/image/sample_random.h"

#include <set>

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

TEST_CASE("the per-sample streams are fixed functions of (seed, epoch, id)") {
  // Computed independently (Python, the SplitMix64 chain the pipeline has always used):
  // crops and flips of a resumed job stay what they were.
  SplitMix64 random = SampleRandom(5, 2, 17);
  CHECK(random.Next() == 5705332244987801161ULL);
  CHECK(random.Next() == 15143891446947485304ULL);
  CHECK(PluginStepRandom(5, 2, 17, 3) == 7468169372821883853ULL);
}

TEST_CASE("each of seed, epoch, id and step index changes the values") {
  std::set<uint64_t> firsts;
  for (uint64_t seed : {0, 1}) {
    for (uint64_t epoch : {0, 1}) {
      for (uint64_t id : {0, 1}) firsts.insert(SampleRandom(seed, epoch, id).Next());
    }
  }
  CHECK(firsts.size() == 8);
  std::set<uint64_t> steps;
  for (size_t step = 0; step < 8; ++step) steps.insert(PluginStepRandom(1, 2, 3, step));
  CHECK(steps.size() == 8);
  CHECK(PluginStepRandom(1, 2, 3, 0) != SampleRandom(1, 2, 3).Next());
}

}  // namespace
}  // namespace ember::daemon
