#include "common/fault_env.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace ember {

namespace {
// An OK "error" would make ReadFile return a Result with neither value nor error.
Status NotOk(Status error, const std::string& path) {
  if (error.ok()) return Internal(path + ": injected fault");
  return error;
}

// A file of the base Env whose reads fail with `error` (if not OK) or stop at byte
// `readable`.
class FaultReadableFile : public ReadableFile {
 public:
  FaultReadableFile(std::unique_ptr<ReadableFile> base, Status error, uint64_t readable)
      : ReadableFile(base->path(), base->Size()),
        base_(std::move(base)),
        error_(std::move(error)),
        readable_(readable) {}

  Result<size_t> ReadSome(uint64_t offset, size_t n, void* dst) const override {
    if (!error_.ok()) return error_;
    if (offset >= readable_) return size_t{0};
    const size_t allowed = static_cast<size_t>(std::min<uint64_t>(n, readable_ - offset));
    return base_->ReadSome(offset, allowed, dst);
  }

  void WillNeed() const override { base_->WillNeed(); }

 private:
  const std::unique_ptr<ReadableFile> base_;
  const Status error_;
  const uint64_t readable_;
};

// A file of the base Env whose writes fail with `error` (if not OK) and whose syncs
// first ask `sync_fault`.
class FaultWritableFile : public WritableFile {
 public:
  FaultWritableFile(std::unique_ptr<WritableFile> base, Status error,
                    std::function<Status()> sync_fault)
      : WritableFile(base->path()),
        base_(std::move(base)),
        error_(std::move(error)),
        sync_fault_(std::move(sync_fault)) {}

  Status WriteAt(uint64_t offset, const void* data, size_t n) override {
    if (!error_.ok()) return error_;
    return base_->WriteAt(offset, data, n);
  }
  Status Sync() override {
    EMBER_RETURN_IF_ERROR(sync_fault_());
    return base_->Sync();
  }
  Status SyncData() override {
    EMBER_RETURN_IF_ERROR(sync_fault_());
    return base_->SyncData();
  }
  Status Truncate(uint64_t size) override {
    if (!error_.ok()) return error_;
    return base_->Truncate(size);
  }
  void DontNeed() override { base_->DontNeed(); }
  Status Close() override { return base_->Close(); }

 private:
  const std::unique_ptr<WritableFile> base_;
  const Status error_;
  const std::function<Status()> sync_fault_;
};

}  // namespace

void FaultEnv::FailReadFile(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  read_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::FailWriteFileAtomic(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  write_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::FailMapReadOnly(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  map_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::FailReadAt(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  read_at_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::ShortenReads(const std::string& path, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  short_reads_[path] = bytes;
}

void FaultEnv::FailWriteAt(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  write_at_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::FailSync(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  sync_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::HoldSyncs(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  held_syncs_.insert(path);
}

void FaultEnv::FailRename(const std::string& path, Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  rename_faults_[path] = NotOk(std::move(error), path);
}

void FaultEnv::DisableExchange() {
  std::lock_guard<std::mutex> lock(mu_);
  exchange_disabled_ = true;
}

void FaultEnv::ClearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  read_faults_.clear();
  write_faults_.clear();
  map_faults_.clear();
  read_at_faults_.clear();
  short_reads_.clear();
  write_at_faults_.clear();
  rename_faults_.clear();
  sync_faults_.clear();
  held_syncs_.clear();
  exchange_disabled_ = false;
  syncs_released_.notify_all();
}

int FaultEnv::WriteCount(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = write_counts_.find(path);
  return it == write_counts_.end() ? 0 : it->second;
}

Status FaultEnv::Find(const std::map<std::string, Status>& faults,
                      const std::string& path) const {
  auto it = faults.find(path);
  if (it == faults.end()) return Status::Ok();
  return it->second.WithContext(path);
}

Status FaultEnv::RenameFault(const std::string& a, const std::string& b) const {
  std::lock_guard<std::mutex> lock(mu_);
  Status fault = Find(rename_faults_, a);
  return fault.ok() ? Find(rename_faults_, b) : fault;
}

Status FaultEnv::SyncFault(const std::string& path) {
  std::unique_lock<std::mutex> lock(mu_);
  syncs_released_.wait(lock, [&] { return held_syncs_.count(path) == 0; });
  return Find(sync_faults_, path);
}

std::unique_ptr<WritableFile> FaultEnv::WrapWritable(const std::string& path,
                                                     std::unique_ptr<WritableFile> file) {
  Status error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = Find(write_at_faults_, path);
  }
  return std::make_unique<FaultWritableFile>(std::move(file), std::move(error),
                                             [this, path] { return SyncFault(path); });
}

Result<std::string> FaultEnv::ReadFile(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = read_faults_.find(path);
    if (it != read_faults_.end()) return it->second;
  }
  return target()->ReadFile(path);
}

Status FaultEnv::WriteFileAtomic(const std::string& path, const std::string& contents) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++write_counts_[path];
    auto it = write_faults_.find(path);
    if (it != write_faults_.end()) return it->second;
  }
  return target()->WriteFileAtomic(path, contents);
}

Result<std::unique_ptr<ReadableFile>> FaultEnv::OpenForRead(const std::string& path) {
  Status error;
  uint64_t readable = UINT64_MAX;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = Find(read_at_faults_, path);
    auto it = short_reads_.find(path);
    if (it != short_reads_.end()) readable = it->second;
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, target()->OpenForRead(path));
  if (error.ok() && readable == UINT64_MAX) return file;
  return std::unique_ptr<ReadableFile>(
      std::make_unique<FaultReadableFile>(std::move(file), std::move(error), readable));
}

Result<std::unique_ptr<MappedFile>> FaultEnv::MapReadOnly(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Status fault = Find(map_faults_, path);
    if (!fault.ok()) return fault;
  }
  return target()->MapReadOnly(path);
}

Result<std::unique_ptr<WritableFile>> FaultEnv::CreateWritableFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, target()->CreateWritableFile(path));
  return WrapWritable(path, std::move(file));
}

Result<std::unique_ptr<WritableFile>> FaultEnv::OpenWritableFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, target()->OpenWritableFile(path));
  return WrapWritable(path, std::move(file));
}

Status FaultEnv::Rename(const std::string& from, const std::string& to) {
  EMBER_RETURN_IF_ERROR(RenameFault(from, to));
  return target()->Rename(from, to);
}

Status FaultEnv::RenameNoReplace(const std::string& from, const std::string& to) {
  EMBER_RETURN_IF_ERROR(RenameFault(from, to));
  return target()->RenameNoReplace(from, to);
}

Result<bool> FaultEnv::Exchange(const std::string& a, const std::string& b) {
  EMBER_RETURN_IF_ERROR(RenameFault(a, b));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (exchange_disabled_) return false;
  }
  return target()->Exchange(a, b);
}

Status FaultEnv::SyncDir(const std::string& dir) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    EMBER_RETURN_IF_ERROR(Find(sync_faults_, dir));
  }
  return target()->SyncDir(dir);
}

}  // namespace ember
