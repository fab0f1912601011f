// MemEnv (tests and fuzz targets only): a read-only Env over files held in memory, so
// that a parser reached through an Env (ReadFile, OpenForRead, MapReadOnly) can be fed
// bytes without touching the disk. Each file is its own heap block of exactly its size,
// so a read one byte past its end is caught by AddressSanitizer.
//
// Directories are the parents of the files added (and those added with AddDirectory).
// Every call that would write (WriteFileAtomic, CreateWritableFile, Rename, ...) and
// CreateSharedMemory fail with kFailedPrecondition "<path>: MemEnv is read-only".
//
// Thread-safety: Add* must not race with other calls; the reading calls, and the files
// they return, are safe from any thread. Files returned must not outlive the MemEnv.
#ifndef EMBER_COMMON_MEM_ENV_H_
#define EMBER_COMMON_MEM_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/env.h"
#include "ember/status.h"

namespace ember {

class MemEnv : public Env {
 public:
  // Adds (or replaces) the regular file `path` (absolute) holding `contents`; its parent
  // directories exist from now on.
  void AddFile(const std::string& path, const std::string& contents);
  // Adds the directory `path` (absolute) and its parents.
  void AddDirectory(const std::string& path);

  Result<std::string> ReadFile(const std::string& path) override;
  Status WriteFileAtomic(const std::string& path, const std::string& contents) override;
  bool FileExists(const std::string& path) override;
  bool IsDirectory(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& dir) override;
  Result<std::unique_ptr<SharedMemory>> CreateSharedMemory(const std::string& name,
                                                           size_t size) override;
  Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> CreateWritableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> OpenWritableFile(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RenameNoReplace(const std::string& from, const std::string& to) override;
  Result<bool> Exchange(const std::string& a, const std::string& b) override;
  Status RemoveAll(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;
  Status RestrictToOwner(const std::string& path) override;
  // Advances by one on every call.
  uint64_t NowMicros() override { return ++now_micros_; }

 private:
  // kNotFound, or kInvalidArgument for a directory, as PosixEnv's OpenForRead.
  Result<const std::vector<char>*> Find(const std::string& path) const;

  std::map<std::string, std::unique_ptr<std::vector<char>>> files_;
  std::set<std::string> directories_{"/"};
  uint64_t now_micros_ = 0;
};

}  // namespace ember

#endif  // EMBER_COMMON_MEM_ENV_H_
