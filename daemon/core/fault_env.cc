#include "daemon/core/fault_env.h"

#include <utility>

namespace ember::daemon {

namespace {
// An OK "error" would make ReadFile return a Result with neither value nor error.
Status NotOk(Status error, const std::string& path) {
  if (error.ok()) return Internal(path + ": injected fault");
  return error;
}
}  // namespace

void FaultEnv::FailReadFile(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  read_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::FailWriteFileAtomic(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  write_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::ClearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  read_faults_.clear();
  write_faults_.clear();
}

int FaultEnv::WriteCount(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = write_counts_.find(path);
  return it == write_counts_.end() ? 0 : it->second;
}

Result<std::string> FaultEnv::ReadFile(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = read_faults_.find(path);
    if (it != read_faults_.end()) return it->second;
  }
  return base_->ReadFile(path);
}

Status FaultEnv::WriteFileAtomic(const std::string& path, const std::string& contents) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++write_counts_[path];
    auto it = write_faults_.find(path);
    if (it != write_faults_.end()) return it->second;
  }
  return base_->WriteFileAtomic(path, contents);
}

}  // namespace ember::daemon
