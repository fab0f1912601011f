#include "daemon/catalog/dataset.h"

namespace ember::daemon {

namespace {

constexpr ring::DType kAllDTypes[] = {
    ring::DType::kUInt8, ring::DType::kInt8,  ring::DType::kInt16,   ring::DType::kUInt16,
    ring::DType::kInt32, ring::DType::kInt64, ring::DType::kFloat32, ring::DType::kFloat64,
};

constexpr size_t kMaxNameLength = 64;

}  // namespace

uint64_t TensorSpec::SampleBytes() const {
  uint64_t bytes = ring::DTypeSize(dtype);
  for (int64_t dim : shape) bytes *= static_cast<uint64_t>(dim);
  return bytes;
}

Status ValidateOnError(const std::string& on_error) {
  if (on_error == "fail" || on_error == "skip") return Status::Ok();
  return InvalidArgument("on_error: '" + on_error + "' is not one of fail, skip");
}

Status ValidateDatasetName(const std::string& name) {
  if (name.empty()) return InvalidArgument("dataset name is empty");
  if (name.size() > kMaxNameLength) {
    return InvalidArgument("dataset name '" + name + "' is " + std::to_string(name.size()) +
                           " characters long (at most " + std::to_string(kMaxNameLength) + ")");
  }
  if (name[0] == '.') {
    return InvalidArgument("dataset name '" + name + "' must not start with '.'");
  }
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) {
      return InvalidArgument("dataset name '" + name +
                             "' may hold only letters, digits, '_', '.' and '-'");
    }
  }
  return Status::Ok();
}

const char* DTypeName(ring::DType dtype) {
  switch (dtype) {
    case ring::DType::kUInt8: return "uint8";
    case ring::DType::kInt8: return "int8";
    case ring::DType::kInt16: return "int16";
    case ring::DType::kUInt16: return "uint16";
    case ring::DType::kInt32: return "int32";
    case ring::DType::kInt64: return "int64";
    case ring::DType::kFloat32: return "float32";
    case ring::DType::kFloat64: return "float64";
  }
  return "invalid";
}

Result<ring::DType> ParseDType(const std::string& name) {
  std::string known;
  for (ring::DType dtype : kAllDTypes) {
    if (name == DTypeName(dtype)) return dtype;
    known += (known.empty() ? "" : ", ") + std::string(DTypeName(dtype));
  }
  return InvalidArgument("unknown dtype '" + name + "' (known: " + known + ")");
}

}  // namespace ember::daemon
