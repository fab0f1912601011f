#include "common/mem_env.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace ember {

namespace {

Status ReadOnly(const std::string& path) {
  return FailedPrecondition(path + ": MemEnv is read-only");
}

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return path.substr(0, slash);
}

class MemReadableFile : public ReadableFile {
 public:
  MemReadableFile(const std::string& path, const std::vector<char>& bytes)
      : ReadableFile(path, bytes.size()), bytes_(bytes) {}

  Result<size_t> ReadSome(uint64_t offset, size_t n, void* dst) const override {
    if (offset >= bytes_.size()) return size_t{0};
    const size_t count = static_cast<size_t>(std::min<uint64_t>(n, bytes_.size() - offset));
    std::memcpy(dst, bytes_.data() + offset, count);
    return count;
  }
  void WillNeed() const override {}

 private:
  const std::vector<char>& bytes_;
};

class MemMappedFile : public MappedFile {
 public:
  MemMappedFile(const std::string& path, const std::vector<char>& bytes)
      : MappedFile(path, bytes.empty() ? nullptr : bytes.data(), bytes.size()) {}

  Status Advise(Access) const override { return Status::Ok(); }
  void WillNeed(uint64_t, uint64_t) const override {}
};

}  // namespace

void MemEnv::AddFile(const std::string& path, const std::string& contents) {
  files_[path] = std::make_unique<std::vector<char>>(contents.begin(), contents.end());
  AddDirectory(Parent(path));
}

void MemEnv::AddDirectory(const std::string& path) {
  for (std::string dir = path; directories_.insert(dir).second; dir = Parent(dir)) {
  }
}

Result<const std::vector<char>*> MemEnv::Find(const std::string& path) const {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second.get();
  if (directories_.count(path) > 0) {
    return InvalidArgument(path + ": not a regular file (a directory)");
  }
  return NotFound(path + ": cannot open: No such file or directory");
}

Result<std::string> MemEnv::ReadFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::vector<char>* bytes, Find(path));
  return std::string(bytes->begin(), bytes->end());
}

bool MemEnv::FileExists(const std::string& path) {
  return files_.count(path) > 0 || directories_.count(path) > 0;
}

bool MemEnv::IsDirectory(const std::string& path) { return directories_.count(path) > 0; }

Result<std::vector<std::string>> MemEnv::ListDir(const std::string& dir) {
  if (!IsDirectory(dir)) return NotFound(dir + ": cannot list: No such directory");
  const std::string prefix = dir == "/" ? dir : dir + "/";
  std::set<std::string> names;
  auto add = [&](const std::string& path) {
    if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
        path.find('/', prefix.size()) == std::string::npos) {
      names.insert(path.substr(prefix.size()));
    }
  };
  for (const auto& [path, bytes] : files_) add(path);
  for (const std::string& path : directories_) add(path);
  return std::vector<std::string>(names.begin(), names.end());
}

Result<std::unique_ptr<ReadableFile>> MemEnv::OpenForRead(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::vector<char>* bytes, Find(path));
  return std::unique_ptr<ReadableFile>(new MemReadableFile(path, *bytes));
}

Result<std::unique_ptr<MappedFile>> MemEnv::MapReadOnly(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::vector<char>* bytes, Find(path));
  return std::unique_ptr<MappedFile>(new MemMappedFile(path, *bytes));
}

Status MemEnv::WriteFileAtomic(const std::string& path, const std::string&) {
  return ReadOnly(path);
}
Status MemEnv::CreateDirs(const std::string& path) { return ReadOnly(path); }
Result<std::unique_ptr<SharedMemory>> MemEnv::CreateSharedMemory(const std::string& name,
                                                                 size_t) {
  return ReadOnly(name);
}
Result<std::unique_ptr<WritableFile>> MemEnv::CreateWritableFile(const std::string& path) {
  return ReadOnly(path);
}
Result<std::unique_ptr<WritableFile>> MemEnv::OpenWritableFile(const std::string& path) {
  return ReadOnly(path);
}
Status MemEnv::Rename(const std::string&, const std::string& to) { return ReadOnly(to); }
Status MemEnv::RenameNoReplace(const std::string&, const std::string& to) {
  return ReadOnly(to);
}
Result<bool> MemEnv::Exchange(const std::string&, const std::string& b) { return ReadOnly(b); }
Status MemEnv::RemoveAll(const std::string& path) { return ReadOnly(path); }
Status MemEnv::SyncDir(const std::string& dir) { return ReadOnly(dir); }
Status MemEnv::RestrictToOwner(const std::string& path) { return ReadOnly(path); }

}  // namespace ember
