// FaultEnv (tests only): an Env that forwards every call to a base Env, except calls on
// paths it was told to fail. Lets tests check that a failed read, write, mapping or
// rename is reported (naming the path) and leaves in-memory and on-disk state as it was.
//
//   ReadFile / WriteFileAtomic / MapReadOnly / Rename*: the call returns the error
//     without touching the file.
//   FailReadAt / ShortenReads / FailWriteAt: the file opens (or is created) through the
//     base Env; its reads or writes then fail. These apply to files opened or created
//     after the fault is set.
//   FailSync / HoldSyncs: a file's syncs fail or never finish, from the moment the
//     fault is set, also for files already open.
// Faults set with Fail* other than FailReadFile / FailWriteFileAtomic come back with the
// path in front, "<path>: <message>", as a real error names its path.
//
// Thread-safety: safe to call from any thread, also while faults are being changed.
#ifndef EMBER_COMMON_FAULT_ENV_H_
#define EMBER_COMMON_FAULT_ENV_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/env.h"
#include "common/env_wrapper.h"
#include "ember/status.h"

namespace ember {

class FaultEnv : public EnvWrapper {
 public:
  // `base` is not owned and must outlive this object and every file it opened.
  explicit FaultEnv(Env* base) : EnvWrapper(base) {}

  // From now on, ReadFile(path) / WriteFileAtomic(path, ...) return `error` (not OK)
  // for exactly this path, until ClearFaults(). An OK `error` becomes kInternal (so for
  // every Fail* below).
  void FailReadFile(const std::string& path, Status error);
  void FailWriteFileAtomic(const std::string& path, Status error);

  // MapReadOnly(path) fails (e.g. out of address space).
  void FailMapReadOnly(const std::string& path, Status error);
  // OpenForRead(path) succeeds, but every read of the file fails (e.g. a bad sector).
  void FailReadAt(const std::string& path, Status error);
  // OpenForRead(path) succeeds with the file's real Size(), but its reads stop at byte
  // `bytes`, as if the file shrank after it was opened: ReadAt past it is kDataLoss.
  void ShortenReads(const std::string& path, uint64_t bytes);
  // CreateWritableFile(path) / OpenWritableFile(path) succeed, but every WriteAt and
  // Truncate fails (e.g. a full disk).
  void FailWriteAt(const std::string& path, Status error);
  // Sync and SyncData of the writable file `path`, and SyncDir(path), fail.
  void FailSync(const std::string& path, Status error);
  // Sync and SyncData of the writable file `path` block until ClearFaults() (a disk that
  // never completes a flush); whoever waits on them must have a deadline.
  void HoldSyncs(const std::string& path);
  // Rename, RenameNoReplace and Exchange with `path` as either argument fail.
  void FailRename(const std::string& path, Status error);
  // Exchange returns false, as on a filesystem without renameat2(RENAME_EXCHANGE).
  void DisableExchange();

  // Removes every fault above and lets held syncs go on.
  void ClearFaults();

  // How many WriteFileAtomic calls were made for `path`, failed ones included.
  int WriteCount(const std::string& path) const;

  Result<std::string> ReadFile(const std::string& path) override;
  Status WriteFileAtomic(const std::string& path, const std::string& contents) override;
  Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> CreateWritableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> OpenWritableFile(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RenameNoReplace(const std::string& from, const std::string& to) override;
  Result<bool> Exchange(const std::string& a, const std::string& b) override;
  Status SyncDir(const std::string& dir) override;

 private:
  // The fault set for `path` in `faults`, with the path in front; OK if there is none.
  Status Find(const std::map<std::string, Status>& faults, const std::string& path) const;
  // The rename fault for `a` or `b`; OK if there is none.
  Status RenameFault(const std::string& a, const std::string& b) const;
  // The sync fault for `path`, after waiting while its syncs are held.
  Status SyncFault(const std::string& path);
  // `file` (of the base Env, at `path`) with this Env's write and sync faults.
  std::unique_ptr<WritableFile> WrapWritable(const std::string& path,
                                             std::unique_ptr<WritableFile> file);

  mutable std::mutex mu_;
  std::map<std::string, Status> read_faults_;    // guarded by mu_
  std::map<std::string, Status> write_faults_;   // guarded by mu_
  std::map<std::string, Status> map_faults_;     // guarded by mu_
  std::map<std::string, Status> read_at_faults_; // guarded by mu_
  std::map<std::string, uint64_t> short_reads_;  // guarded by mu_
  std::map<std::string, Status> write_at_faults_;  // guarded by mu_
  std::map<std::string, Status> rename_faults_;  // guarded by mu_
  std::map<std::string, Status> sync_faults_;    // guarded by mu_
  std::set<std::string> held_syncs_;             // guarded by mu_
  std::condition_variable syncs_released_;       // held_syncs_ cleared
  bool exchange_disabled_ = false;               // guarded by mu_
  std::map<std::string, int> write_counts_;      // guarded by mu_
};

}  // namespace ember

#endif  // EMBER_COMMON_FAULT_ENV_H_
