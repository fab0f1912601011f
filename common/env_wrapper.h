// EnvWrapper: an Env that forwards every call to another Env, its target (as LevelDB's
// EnvWrapper). An Env that changes a few calls of another (CallerEnv checks reads,
// FaultEnv injects faults) derives from it and overrides only those; a call added to Env
// is added here once, and every wrapper forwards it.
//
// Thread-safety: as the target's; the wrapper holds no state of its own.
#ifndef EMBER_COMMON_ENV_WRAPPER_H_
#define EMBER_COMMON_ENV_WRAPPER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "ember/status.h"

namespace ember {

class EnvWrapper : public Env {
 public:
  // `target` is not owned and must outlive the wrapper.
  explicit EnvWrapper(Env* target) : target_(target) {}

  // The Env every call not overridden goes to.
  Env* target() const { return target_; }

  Result<std::string> ReadFile(const std::string& path) override {
    return target_->ReadFile(path);
  }
  Status WriteFileAtomic(const std::string& path, const std::string& contents) override {
    return target_->WriteFileAtomic(path, contents);
  }
  bool FileExists(const std::string& path) override { return target_->FileExists(path); }
  bool IsDirectory(const std::string& path) override { return target_->IsDirectory(path); }
  Status CreateDirs(const std::string& path) override { return target_->CreateDirs(path); }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return target_->ListDir(dir);
  }
  Result<std::unique_ptr<SharedMemory>> CreateSharedMemory(const std::string& name,
                                                           size_t size) override {
    return target_->CreateSharedMemory(name, size);
  }
  Result<std::unique_ptr<SharedMemory>> CreateWriteSealedSharedMemory(const std::string& name,
                                                                      size_t size) override {
    return target_->CreateWriteSealedSharedMemory(name, size);
  }
  Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    return target_->OpenForRead(path);
  }
  Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) override {
    return target_->MapReadOnly(path);
  }
  Result<std::unique_ptr<WritableFile>> CreateWritableFile(const std::string& path) override {
    return target_->CreateWritableFile(path);
  }
  Result<std::unique_ptr<WritableFile>> OpenWritableFile(const std::string& path) override {
    return target_->OpenWritableFile(path);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return target_->Rename(from, to);
  }
  Status RenameNoReplace(const std::string& from, const std::string& to) override {
    return target_->RenameNoReplace(from, to);
  }
  Result<bool> Exchange(const std::string& a, const std::string& b) override {
    return target_->Exchange(a, b);
  }
  Status RemoveAll(const std::string& path) override { return target_->RemoveAll(path); }
  Status SyncDir(const std::string& dir) override { return target_->SyncDir(dir); }
  Status RestrictToOwner(const std::string& path) override {
    return target_->RestrictToOwner(path);
  }
  uint64_t NowMicros() override { return target_->NowMicros(); }

 private:
  Env* const target_;
};

}  // namespace ember

#endif  // EMBER_COMMON_ENV_WRAPPER_H_
