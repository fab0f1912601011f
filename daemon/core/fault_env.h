// FaultEnv (tests only): an Env that forwards every call to a base Env, except the
// ReadFile / WriteFileAtomic calls on paths it was told to fail, which return the given
// Status without touching the file. Lets tests check that a failed read or write leaves
// in-memory and on-disk state as it was.
//
// Thread-safety: safe to call from any thread, also while faults are being changed.
#ifndef EMBER_DAEMON_CORE_FAULT_ENV_H_
#define EMBER_DAEMON_CORE_FAULT_ENV_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/core/env.h"
#include "ember/status.h"

namespace ember::daemon {

class FaultEnv : public Env {
 public:
  // `base` is not owned and must outlive this object.
  explicit FaultEnv(Env* base) : base_(base) {}

  // From now on, ReadFile(path) / WriteFileAtomic(path, ...) return `error` (not OK)
  // for exactly this path, until ClearFaults(). An OK `error` becomes kInternal.
  void FailReadFile(const std::string& path, Status error);
  void FailWriteFileAtomic(const std::string& path, Status error);
  void ClearFaults();

  // How many WriteFileAtomic calls were made for `path`, failed ones included.
  int WriteCount(const std::string& path) const;

  Result<std::string> ReadFile(const std::string& path) override;
  Status WriteFileAtomic(const std::string& path, const std::string& contents) override;
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  bool IsDirectory(const std::string& path) override { return base_->IsDirectory(path); }
  Status CreateDirs(const std::string& path) override { return base_->CreateDirs(path); }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return base_->ListDir(dir);
  }
  Result<std::unique_ptr<SharedMemory>> CreateSharedMemory(const std::string& name,
                                                           size_t size) override {
    return base_->CreateSharedMemory(name, size);
  }
  uint64_t NowMicros() override { return base_->NowMicros(); }

 private:
  Env* const base_;
  mutable std::mutex mu_;
  std::map<std::string, Status> read_faults_;   // guarded by mu_
  std::map<std::string, Status> write_faults_;  // guarded by mu_
  std::map<std::string, int> write_counts_;     // guarded by mu_
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CORE_FAULT_ENV_H_
