#include "daemon/data/webdataset/npy_header.h"

#include <cstring>

namespace ember::daemon {
namespace {

// The value of 'key' in the header's dict text, up to the next ',' at depth 0 or '}'.
bool Value(const std::string& header, const std::string& key, std::string& value) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return false;
  at = header.find(':', at);
  if (at == std::string::npos) return false;
  int depth = 0;
  size_t end = at + 1;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  value = header.substr(at + 1, end - at - 1);
  const size_t begin = value.find_first_not_of(" ");
  const size_t last = value.find_last_not_of(" ");
  value = begin == std::string::npos ? "" : value.substr(begin, last - begin + 1);
  return true;
}

bool DTypeOf(const std::string& descr, ring::DType& dtype) {
  static const struct {
    const char* descr;
    ring::DType dtype;
  } kTypes[] = {{"|u1", ring::DType::kUInt8},  {"<u1", ring::DType::kUInt8},
                {"|b1", ring::DType::kUInt8},  {"|i1", ring::DType::kInt8},
                {"<i1", ring::DType::kInt8},   {"<i2", ring::DType::kInt16},
                {"<u2", ring::DType::kUInt16}, {"<i4", ring::DType::kInt32},
                {"<i8", ring::DType::kInt64},  {"<f4", ring::DType::kFloat32},
                {"<f8", ring::DType::kFloat64}};
  for (const auto& type : kTypes) {
    if (descr == std::string("'") + type.descr + "'") {
      dtype = type.dtype;
      return true;
    }
  }
  return false;
}

}  // namespace

Result<NpyHeader> ParseNpyHeader(const std::string& name, const char* data, size_t size) {
  auto bad = [&](const std::string& what) { return DataLoss(name + ": not a usable .npy array: " + what); };
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0) return bad("no \\x93NUMPY magic");
  const auto major = static_cast<uint8_t>(data[6]);
  uint64_t header_len = 0;
  uint64_t header_start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(data[8]) | static_cast<uint64_t>(static_cast<uint8_t>(data[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return bad("truncated header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<uint64_t>(static_cast<uint8_t>(data[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    return bad("format version " + std::to_string(major));
  }
  if (header_start + header_len > size) return bad("truncated header");
  const std::string header(data + header_start, header_len);
  std::string descr, fortran, shape_text;
  if (!Value(header, "descr", descr) || !Value(header, "fortran_order", fortran) ||
      !Value(header, "shape", shape_text)) {
    return bad("its header lacks descr, fortran_order or shape");
  }
  NpyHeader out;
  if (!DTypeOf(descr, out.dtype)) return bad("dtype " + descr + " has no tensor type");
  if (fortran != "False") return bad("Fortran order");
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')')
    return bad("shape " + shape_text);
  uint64_t elements = 1;
  size_t at = 1;
  while (at < shape_text.size() - 1) {
    const size_t comma = shape_text.find(',', at);
    std::string dim = shape_text.substr(at, (comma == std::string::npos ? shape_text.size() - 1 : comma) - at);
    const size_t begin = dim.find_first_not_of(' ');
    if (begin != std::string::npos) {
      dim = dim.substr(begin, dim.find_last_not_of(' ') - begin + 1);
      char* end = nullptr;
      const unsigned long long value = std::strtoull(dim.c_str(), &end, 10);
      if (dim.empty() || *end != '\0' || value > (1ull << 40)) return bad("shape " + shape_text);
      out.shape.push_back(static_cast<int64_t>(value));
      elements *= value;
      if (elements > (1ull << 40)) return bad("shape " + shape_text);
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (out.shape.size() + 1 > ring::kMaxDims)
    return bad(std::to_string(out.shape.size()) + " dimensions (at most " +
               std::to_string(ring::kMaxDims - 1) + ")");
  out.data_offset = header_start + header_len;
  out.data_bytes = elements * ring::DTypeSize(out.dtype);
  if (out.data_offset + out.data_bytes > size) {
    return bad("shape " + shape_text + " needs " + std::to_string(out.data_bytes) +
               " bytes, the member has " + std::to_string(size - out.data_offset));
  }
  return out;
}

}  // namespace ember::daemon
