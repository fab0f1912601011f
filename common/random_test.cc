#include "common/random.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

namespace ember {
namespace {

TEST_CASE("SplitMix64 gives the reference outputs") {
  // The outputs of Vigna's splitmix64.c for these seeds.
  SplitMix64 zero(0);
  CHECK(zero.Next() == 0xE220A8397B1DCDAFULL);
  CHECK(zero.Next() == 0x6E789E6AA1B965F4ULL);
  SplitMix64 rng(1234567);
  CHECK(rng.Next() == 6457827717110365317ULL);
  CHECK(rng.Next() == 3203168211198807973ULL);
  CHECK(rng.Next() == 9817491932198370423ULL);
}

TEST_CASE("Below stays in range and covers it") {
  SplitMix64 rng(7);
  for (uint64_t bound : {1ULL, 2ULL, 3ULL, 10ULL, 1000003ULL, ~0ULL}) {
    for (int i = 0; i < 2000; ++i) REQUIRE(rng.Below(bound) < bound);
  }
  std::vector<int> seen(5, 0);
  for (int i = 0; i < 500; ++i) ++seen[rng.Below(5)];
  for (int count : seen) CHECK(count > 50);
}

TEST_CASE("Below has no modulo or multiply-shift bias") {
  // bound = 3 * 2^62: a modulo draws [0, 2^62) twice as often as the rest (1/2, not 1/3);
  // a multiply-shift without rejection draws multiples of 3 twice as often.
  const uint64_t bound = 3ULL << 62;
  SplitMix64 rng(42);
  const int kDraws = 30000;
  int low = 0, multiple_of_3 = 0;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t value = rng.Below(bound);
    REQUIRE(value < bound);
    low += value < (1ULL << 62);
    multiple_of_3 += value % 3 == 0;
  }
  CHECK(std::abs(low / double(kDraws) - 1.0 / 3) < 0.02);
  CHECK(std::abs(multiple_of_3 / double(kDraws) - 1.0 / 3) < 0.02);
}

TEST_CASE("Below(bits, bound) keeps a good first candidate and redraws a rejected one") {
  SplitMix64 rng(1);
  // 2^63 + 1: bits * 1000 = 500 * 2^64 + 1000, whose low half 1000 is not rejected.
  CHECK(rng.Below(0x8000000000000001ULL, 1000) == 500);
  // 0 * 3 has low half 0 < 2^64 mod 3 = 1: rejected, so the draw is the generator's.
  SplitMix64 a(1), b(1);
  const uint64_t redrawn = a.Below(0, 3);
  CHECK(redrawn == b.Below(3));
  CHECK(redrawn == 1);  // the multiply-shift of splitmix64(1)'s first output
}

TEST_CASE("Uniform is in [0, 1) and in [lo, hi)") {
  SplitMix64 rng(3);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.Uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    sum += u;
    const double v = rng.Uniform(-2.0, 5.0);
    REQUIRE(v >= -2.0);
    REQUIRE(v < 5.0);
  }
  CHECK(std::abs(sum / 10000 - 0.5) < 0.02);
  CHECK(SplitMix64(0).Uniform() == (0xE220A8397B1DCDAFULL >> 11) * 0x1.0p-53);
}

TEST_CASE("stream seeds are fixed functions of their words") {
  // Computed independently (Python).
  CHECK(StreamSeed(1, 0, 0x632BE59BD9B4E019ULL) == 14445349681843478652ULL);
  CHECK(ChainSeed({1, 2, 3}) == 15020427595393229491ULL);
  CHECK(ChainSeed({42}) == 13679457532755275413ULL);
  CHECK(StreamSeed(1, 0, 5) != StreamSeed(0, 1, 5));
  CHECK(StreamSeed(1, 0, 5) != StreamSeed(1, 0, 6));
  CHECK(ChainSeed({1, 2}) != ChainSeed({2, 1}));
}

}  // namespace
}  // namespace ember
