#include "daemon/data/field_values.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>

namespace ember::daemon {
namespace {

// [begin, end) without surrounding whitespace.
void Trim(const char*& begin, const char*& end) {
  while (begin < end && std::isspace(static_cast<unsigned char>(*begin))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(end[-1]))) --end;
}

}  // namespace

bool ParseDecimalInt64(const char* data, size_t size, int64_t& value) {
  const char* begin = data;
  const char* end = data + size;
  Trim(begin, end);
  if (begin < end && *begin == '+') ++begin;
  auto [at, error] = std::from_chars(begin, end, value);
  return begin < end && error == std::errc() && at == end;
}

bool ParseDecimalDouble(const char* data, size_t size, double& value) {
  const char* begin = data;
  const char* end = data + size;
  Trim(begin, end);
  if (begin < end && *begin == '+') ++begin;
  auto [at, error] = std::from_chars(begin, end, value);
  return begin < end && error == std::errc() && at == end;
}

// IEEE 754 half to single precision (exact).
bool LoadInt64(const char* data, size_t bytes, bool is_signed, int64_t& value) {
  auto load = [data](auto v) {
    std::memcpy(&v, data, sizeof(v));
    return v;
  };
  switch (bytes) {
    case 1: value = is_signed ? int64_t{load(int8_t{})} : int64_t{load(uint8_t{})}; return true;
    case 2: value = is_signed ? int64_t{load(int16_t{})} : int64_t{load(uint16_t{})}; return true;
    case 4: value = is_signed ? int64_t{load(int32_t{})} : int64_t{load(uint32_t{})}; return true;
    case 8: {
      const uint64_t wide = load(uint64_t{});
      value = static_cast<int64_t>(wide);
      return is_signed || wide <= static_cast<uint64_t>(INT64_MAX);
    }
    default: return false;
  }
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half >> 15) << 31;
  const uint32_t exponent = (half >> 10) & 0x1f;
  const uint32_t mantissa = half & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &magnitude, sizeof(bits));
  bits |= sign;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

std::string ShapeText(ring::DType dtype, const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    text += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  return text + ") " + DTypeName(dtype);
}

std::vector<TensorSpec> BytesTensors(const std::string& name, uint32_t max_size) {
  const int64_t capacity = std::max<uint32_t>(max_size, 1);
  return {TensorSpec{name, ring::DType::kUInt8, {capacity}},
          TensorSpec{name + "_size", ring::DType::kInt64, {}}};
}

void WriteBytesTensors(const char* data, uint32_t size, uint32_t max_size, void* bytes_dst,
                       void* size_dst) {
  auto* dst = static_cast<char*>(bytes_dst);
  const size_t capacity = std::max<uint32_t>(max_size, 1);
  if (size > 0) std::memcpy(dst, data, size);
  std::memset(dst + size, 0, capacity - size);
  const int64_t count = size;
  std::memcpy(size_dst, &count, sizeof(count));
}

Status CheckColumnTensors(const std::string& where, const std::vector<ColumnTensor>& tensors,
                          const std::string& columns) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ColumnTensor& t = tensors[i];
    if (t.tensor.size() >= ring::kNameBytes) {
      return InvalidArgument(where + ": column '" + t.column + "' makes tensor '" + t.tensor +
                             "', longer than " + std::to_string(ring::kNameBytes - 1) + " bytes");
    }
    for (size_t j = 0; j < i; ++j) {
      if (tensors[j].tensor == t.tensor) {
        return InvalidArgument(where + ": columns '" + tensors[j].column + "' and '" + t.column +
                               "' both make tensor '" + t.tensor + "'");
      }
    }
  }
  if (tensors.size() > ring::kMaxTensors) {
    return InvalidArgument(where + ": the columns (" + columns + ") make " +
                           std::to_string(tensors.size()) + " tensors, at most " +
                           std::to_string(ring::kMaxTensors) + " fit a batch");
  }
  return Status::Ok();
}

}  // namespace ember::daemon
