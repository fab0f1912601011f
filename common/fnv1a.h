// FNV-1a, 64 bits: a small, fast, non-cryptographic hash of bytes, for names, layouts and
// fingerprints that must be the same in every process and build.
#ifndef EMBER_COMMON_FNV1A_H_
#define EMBER_COMMON_FNV1A_H_

#include <cstddef>
#include <cstdint>

namespace ember {

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;

// The hash of `size` bytes at `data`, continuing from `hash` (start: kFnv1a64Offset).
inline uint64_t Fnv1a64(const void* data, size_t size, uint64_t hash = kFnv1a64Offset) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ p[i]) * 0x100000001b3ull;
  return hash;
}

// Fnv1a64 of `value`'s 8 bytes, least significant first (whatever the host's order).
inline uint64_t Fnv1a64Le(int64_t value, uint64_t hash) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
  return Fnv1a64(bytes, sizeof(bytes), hash);
}

}  // namespace ember

#endif  // EMBER_COMMON_FNV1A_H_
