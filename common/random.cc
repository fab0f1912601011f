#include "common/random.h"

namespace ember {

uint64_t SplitMix64::Below(uint64_t bits, uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(bits) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    while (low < threshold) {
      m = static_cast<unsigned __int128>(Next()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

uint64_t StreamSeed(uint64_t seed, uint64_t epoch, uint64_t salt) {
  return SplitMix64::Mix(seed ^ SplitMix64::Mix(epoch + salt));
}

uint64_t ChainSeed(std::initializer_list<uint64_t> words) {
  const uint64_t* word = words.begin();
  uint64_t h = words.size() == 0 ? 0 : *word++;
  for (; word != words.end(); ++word) h = SplitMix64::Mix(h + SplitMix64::kGamma) ^ *word;
  return SplitMix64::Mix(h + SplitMix64::kGamma);
}

}  // namespace ember
