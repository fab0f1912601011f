// Seeded randomness whose output is fully specified, so every daemon, thread and
// standard library computes the same values from the same seed (the standard
// <random> distributions and std::shuffle differ between implementations).
//
//   SplitMix64   the generator (Steele, Lea, Flood 2014): a 64-bit counter advanced by
//                the golden-ratio gamma and passed through Mix.
//   stream seed  a generator's starting state, derived from (seed, epoch, ...) so that
//                different inputs give unrelated streams.
//
// Nothing here is for cryptography.
#ifndef EMBER_COMMON_RANDOM_H_
#define EMBER_COMMON_RANDOM_H_

#include <cstdint>
#include <initializer_list>

namespace ember {

// Not thread-safe; cheap to copy. A copy continues the same stream.
class SplitMix64 {
 public:
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;

  explicit SplitMix64(uint64_t state) : state_(state) {}

  // The next 64 random bits.
  uint64_t Next() {
    state_ += kGamma;
    return Mix(state_);
  }

  // Uniform in [0, bound), bound > 0, without modulo bias (Lemire 2019: the high half of
  // Next() * bound, drawing again for the few low halves that would over-represent
  // some outputs).
  uint64_t Below(uint64_t bound) { return Below(Next(), bound); }

  // The same, with `bits` (a value already drawn or derived) as the first candidate;
  // draws from this generator only when that candidate is rejected (probability below
  // bound / 2^64).
  uint64_t Below(uint64_t bits, uint64_t bound);

  // Uniform in [0, 1): the top 53 bits of Next().
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

  // SplitMix64's output function: a bijection of 64-bit words that mixes every input bit
  // into every output bit.
  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// Mix(seed ^ Mix(epoch + salt)): the epoch is mixed before it is combined, so seed s
// epoch e+1 is not seed s+1 epoch e; each use picks its own `salt` so that its stream is
// unrelated to the others' for the same (seed, epoch).
uint64_t StreamSeed(uint64_t seed, uint64_t epoch, uint64_t salt);

// Chains words into one: h = words[0], then h = Mix(h + gamma) ^ w for each further
// word, and Mix(h + gamma) at the end (h = 0 without words).
uint64_t ChainSeed(std::initializer_list<uint64_t> words);

}  // namespace ember

#endif  // EMBER_COMMON_RANDOM_H_
