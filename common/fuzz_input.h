// FuzzInput (fuzz targets only): reads a libFuzzer input front to back as a few fields
// (flag bytes, lengths, byte strings), so one input can describe several files or
// options. Reading past the end gives zeros and empty strings, never an error: every
// input is a valid sequence of fields.
#ifndef EMBER_COMMON_FUZZ_INPUT_H_
#define EMBER_COMMON_FUZZ_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ember {

// Not thread-safe; the bytes must outlive it.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - used_; }

  // The next byte, 0 past the end.
  uint8_t Byte() { return used_ < size_ ? data_[used_++] : 0; }

  // The next four bytes as a little-endian number (missing bytes are 0).
  uint32_t U32() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= uint32_t{Byte()} << (8 * i);
    return value;
  }

  // The next min(n, remaining()) bytes.
  std::string Bytes(size_t n) {
    const size_t take = std::min(n, remaining());
    std::string out(reinterpret_cast<const char*>(data_ + used_), take);
    used_ += take;
    return out;
  }

  // Everything not read yet.
  std::string Rest() { return Bytes(remaining()); }

 private:
  const uint8_t* const data_;
  const size_t size_;
  size_t used_ = 0;
};

}  // namespace ember

#endif  // EMBER_COMMON_FUZZ_INPUT_H_
