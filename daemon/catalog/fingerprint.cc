#include "daemon/catalog/fingerprint.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/fnv1a.h"

namespace ember::daemon {
namespace {

constexpr size_t kEdgeBytes = 4096;
constexpr size_t kFilesRead = 16;

// FNV-1a, 64-bit.
class Digest {
 public:
  void Bytes(const void* data, size_t n) { state_ = Fnv1a64(data, n, state_); }
  void U64(uint64_t v) { Bytes(&v, sizeof(v)); }
  void Text(const std::string& s) {
    U64(s.size());
    Bytes(s.data(), s.size());
  }
  uint64_t value() const { return state_ == 0 ? 1 : state_; }

 private:
  uint64_t state_ = kFnv1a64Offset;
};

std::string RelativeTo(const std::string& root, const std::string& file) {
  std::string prefix = root;
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  if (file == prefix) return ".";
  if (file.size() > prefix.size() && file.compare(0, prefix.size(), prefix) == 0 &&
      file[prefix.size()] == '/')
    return file.substr(prefix.size() + 1);
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

}  // namespace

Result<uint64_t> DatasetFingerprint(Env& env, const DatasetInfo& info) {
  Digest digest;
  digest.U64(info.count);
  digest.U64(info.tensors.size());
  for (const TensorSpec& t : info.tensors) {
    digest.Text(t.name);
    digest.U64(static_cast<uint64_t>(t.dtype));
    digest.U64(t.shape.size());
    for (int64_t d : t.shape) digest.U64(static_cast<uint64_t>(d));
  }
  digest.U64(info.files.size());
  std::vector<uint8_t> buffer(kEdgeBytes);
  for (size_t i = 0; i < info.files.size(); ++i) {
    const std::string& path = info.files[i];
    digest.Text(RelativeTo(info.spec.path, path));
    if (i >= kFilesRead || path.find("://") != std::string::npos) continue;  // (a URL: its name)
    if (env.IsDirectory(path)) {
      // An image folder: its entries' names (the classes).
      EMBER_ASSIGN_OR_RETURN(std::vector<std::string> entries, env.ListDir(path));
      std::sort(entries.begin(), entries.end());
      digest.U64(entries.size());
      for (const std::string& entry : entries) digest.Text(entry);
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, env.OpenForRead(path));
    const uint64_t size = file->Size();
    digest.U64(size);
    const size_t head = static_cast<size_t>(std::min<uint64_t>(size, kEdgeBytes));
    EMBER_RETURN_IF_ERROR(file->ReadAt(0, head, buffer.data()));
    digest.Bytes(buffer.data(), head);
    if (size > kEdgeBytes) {
      const size_t tail = static_cast<size_t>(std::min<uint64_t>(size - kEdgeBytes, kEdgeBytes));
      EMBER_RETURN_IF_ERROR(file->ReadAt(size - tail, tail, buffer.data()));
      digest.Bytes(buffer.data(), tail);
    }
  }
  return digest.value();
}

std::string FingerprintHex(uint64_t fingerprint) {
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(fingerprint));
  return out;
}

}  // namespace ember::daemon
