#include "daemon/catalog/dataset.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace ember::daemon {

namespace {

constexpr ring::DType kAllDTypes[] = {
    ring::DType::kUInt8, ring::DType::kInt8,  ring::DType::kInt16,   ring::DType::kUInt16,
    ring::DType::kInt32, ring::DType::kInt64, ring::DType::kFloat32, ring::DType::kFloat64,
};

constexpr size_t kMaxNameLength = 64;

// `text` for an error message: its first 32 bytes, and "..." when there is more.
std::string Excerpt(const std::string& text) {
  return text.size() <= 32 ? text : text.substr(0, 32) + "...";
}

}  // namespace

uint64_t TensorSpec::SampleBytes() const {
  uint64_t bytes = ring::DTypeSize(dtype);
  for (int64_t dim : shape) bytes *= static_cast<uint64_t>(dim);
  return bytes;
}

Status ValidateOnError(const std::string& on_error) {
  if (on_error == "fail" || on_error == "skip") return Status::Ok();
  return InvalidArgument("on_error: '" + Excerpt(on_error) + "' is not one of fail, skip");
}

Status ValidateShuffle(const DatasetSpec& spec) {
  if (spec.shuffle != "samples" && spec.shuffle != "shards")
    return InvalidArgument("shuffle: '" + Excerpt(spec.shuffle) + "' is not one of samples, shards");
  if (spec.shuffle_window == 0 || spec.shuffle_window > kMaxShuffleWindow)
    return InvalidArgument("shuffle_window: " + std::to_string(spec.shuffle_window) +
                           " is not in 1.." + std::to_string(kMaxShuffleWindow));
  return Status::Ok();
}

Status ValidateEndpoint(const DatasetSpec& spec) {
  const std::string& endpoint = spec.endpoint;
  if (endpoint.empty()) return Status::Ok();
  auto bad = [&](const std::string& why) {
    return InvalidArgument("endpoint: '" + endpoint + "' " + why +
                           " (an S3 endpoint is http(s)://HOST[:PORT])");
  };
  const size_t scheme_end = endpoint.find("://");
  const std::string scheme = endpoint.substr(0, scheme_end);
  if (scheme_end == std::string::npos || (scheme != "http" && scheme != "https"))
    return bad("is not an http:// or https:// URL");
  std::string authority = endpoint.substr(scheme_end + 3);
  if (const size_t at = authority.find('@'); at != std::string::npos) {
    // Not quoted: what precedes '@' may be a password.
    return InvalidArgument("endpoint: '" + scheme + "://...@" + authority.substr(at + 1) +
                           "' holds a user name (S3 credentials stay emberd's own)");
  }
  if (!authority.empty() && authority.back() == '/') authority.pop_back();
  if (authority.find_first_of("/?#") != std::string::npos)
    return bad("has a path, query or fragment (buckets are addressed path-style under it)");
  std::string host = authority, port;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos || close == 1) return bad("has an unclosed or empty [address]");
    host = authority.substr(0, close + 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return bad("has text after its [address]");
      port = authority.substr(close + 2);
    }
    for (char c : host.substr(1, host.size() - 2)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
        return bad("has an [address] that is not an IPv6 address");
    }
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
    if (host.empty()) return bad("names no host");
    for (char c : host) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
        return bad("has a host of other than letters, digits, '.', '-' and '_'");
    }
  }
  if (authority.find(':', host.size()) != std::string::npos) {
    const bool digits = !port.empty() && port.size() <= 5 &&
                        std::all_of(port.begin(), port.end(),
                                    [](unsigned char c) { return std::isdigit(c); });
    if (!digits || std::stoul(port) == 0 || std::stoul(port) > 65535)
      return bad("has a port that is not in 1..65535");
  }
  if (spec.path.rfind("s3://", 0) != 0)
    return InvalidArgument("endpoint is for s3:// paths, not '" + Excerpt(spec.path) + "'");
  return Status::Ok();
}

Status ValidateSpecSizes(const DatasetSpec& spec) {
  const std::pair<const char*, std::pair<const std::string*, size_t>> fields[] = {
      {"format", {&spec.format, kMaxFormatBytes}},
      {"path", {&spec.path, kMaxPathBytes}},
      {"split", {&spec.split, kMaxSplitBytes}},
      {"pipeline", {&spec.pipeline, kMaxPipelineBytes}},
      {"endpoint", {&spec.endpoint, kMaxEndpointBytes}},
  };
  for (const auto& [field, value] : fields) {
    if (value.first->size() > value.second)
      return InvalidArgument(std::string(field) + ": " + std::to_string(value.first->size()) +
                             " bytes, at most " + std::to_string(value.second));
  }
  // A C string ends at a NUL: the file opened would not be the path registered.
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"path", &spec.path},
                                     {"format", &spec.format}, {"split", &spec.split},
                                     {"endpoint", &spec.endpoint}}) {
    const size_t nul = value->find('\0');
    if (nul != std::string::npos)
      return InvalidArgument(std::string(field) + ": a NUL byte at offset " +
                             std::to_string(nul) + " ('" + Excerpt(value->substr(0, nul)) +
                             "' before it)");
  }
  return Status::Ok();
}

Status ValidateDatasetName(const std::string& name) {
  if (name.empty()) return InvalidArgument("dataset name is empty");
  if (name.size() > kMaxNameLength) {
    return InvalidArgument("dataset name '" + Excerpt(name) + "' is " +
                           std::to_string(name.size()) + " characters long (at most " +
                           std::to_string(kMaxNameLength) + ")");
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

::ember::DatasetInfo PublicInfo(const DatasetInfo& info) {
  ::ember::DatasetInfo out;
  out.spec = info.spec;
  out.count = info.count;
  for (const TensorSpec& tensor : info.tensors)
    out.tensors.push_back({tensor.name, DTypeName(tensor.dtype), tensor.shape});
  out.files = info.files;
  out.fingerprint = info.fingerprint;
  out.owner_uid = info.owner.principal.uid;
  return out;
}

Status DatasetNotFound(const std::string& name) {
  return NotFound("dataset '" + name + "' not found");
}

bool MayRead(const Principal& caller, const DatasetInfo& info) {
  return info.spec.shared || MayAccess(caller, info.owner.principal);
}

}  // namespace ember::daemon
