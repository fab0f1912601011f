// Env: every piece of OS access the daemon's core needs (files, directories, shared
// memory, the clock), behind one interface so tests can inject faults (as LevelDB's Env).
// main() creates the one PosixEnv and passes it down; there is no global instance.
//
// Glossary:
//   ReadableFile  a regular file open for positioned reads (pread), for files read
//                 whole or in pieces on demand (an image per sample).
//   MappedFile    a whole regular file mapped read-only (mmap), for files too large to
//                 read into memory (token streams, packed shards).
//   WritableFile  a file written at given offsets, then synced and closed: a new one, or an
//                 existing one reopened to append to it (a journal).
//
// Thread-safety: implementations are safe to call from any thread; so are the const
// methods of the files they return.
// Errors: errno is converted here, once, into a Status that names the path.
#ifndef EMBER_COMMON_ENV_H_
#define EMBER_COMMON_ENV_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/status.h"

namespace ember {

// A mapped shared-memory region backed by a sealed memfd. Unmaps and closes on
// destruction; the memory itself lives until every process that mapped it unmaps.
class SharedMemory {
 public:
  SharedMemory(int fd, void* data, size_t size) : fd_(fd), data_(data), size_(size) {}
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  int fd() const { return fd_; }
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  int fd_;
  void* data_;
  size_t size_;
};

// A regular file open for reading at any offset. Closes its descriptor on destruction.
// Const methods are safe to call from many threads at once (no shared file offset).
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;

  const std::string& path() const { return path_; }
  // The size when opened.
  uint64_t Size() const { return size_; }

  // Reads exactly `n` bytes at `offset` into `dst`, in as many reads as it takes.
  // kDataLoss "<path>: truncated while reading: D of N bytes from byte O" if the file
  // ends first (it shrank since it was opened); otherwise ReadSome's errors.
  Status ReadAt(uint64_t offset, size_t n, void* dst) const;

  // One read of up to `n` bytes at `offset` (one pread, retried on EINTR): how many were
  // read, 0 only at the end of the file (or for n == 0). Errors name the path and the
  // byte; ENOMEM is kResourceExhausted. Most callers want ReadAt.
  virtual Result<size_t> ReadSome(uint64_t offset, size_t n, void* dst) const = 0;

  // Asks the kernel to start reading the whole file into the page cache
  // (posix_fadvise WILLNEED) and returns without waiting for it. A hint: never blocks on
  // the file's data, errors are ignored.
  virtual void WillNeed() const = 0;

 protected:
  ReadableFile(std::string path, uint64_t size) : path_(std::move(path)), size_(size) {}

 private:
  const std::string path_;
  const uint64_t size_;
};

// A whole regular file mapped read-only and shared (the page cache, no copy). The
// mapping lives until destruction; no descriptor is held. Immutable: every method is safe
// to call from any thread.
//
// Caveat (as with any mmap): if another process truncates the file while it is mapped,
// touching the lost pages raises SIGBUS. Map only files that are written once, then read.
class MappedFile {
 public:
  // How the mapping will be read next, for the kernel's readahead (madvise).
  enum class Access { kNormal, kSequential, kRandom };

  virtual ~MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  // The file's bytes; null iff size() is 0 (an empty file maps nothing).
  const char* data() const { return data_; }
  uint64_t size() const { return size_; }

  // Sets the readahead policy for the whole mapping. Errors name the path.
  virtual Status Advise(Access access) const = 0;

  // Starts reading bytes [offset, offset + length) into the page cache (MADV_WILLNEED)
  // without waiting for them; the range is clamped to the file. A hint: failures are
  // ignored.
  virtual void WillNeed(uint64_t offset, uint64_t length) const = 0;

  // Whether the file was found shorter than its mapping (its owner truncated it): the
  // pages past its new end read as zeros from then on (common/mapping_guard.h), so a
  // reader checks this after reading and fails with ShrunkError instead of serving them.
  bool shrunk() const { return shrunk_.load(std::memory_order_acquire); }
  // kDataLoss "PATH: the file shrank below the N bytes it had when it was opened ...".
  Status ShrunkError() const;

 protected:
  MappedFile(std::string path, const char* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::atomic<bool> shrunk_{false};  // set by the mapping's guard

 private:
  const std::string path_;
  const char* const data_;
  const uint64_t size_;
};

// A file open for writing. Not thread-safe: one thread writes, syncs and closes.
// Destruction closes it if Close was not called (errors are then lost); the file stays.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;

  const std::string& path() const { return path_; }

  // Writes all `n` bytes at `offset` (pwrite, as many as it takes); the file grows as
  // needed. Errors name the path, the size and the offset; ENOSPC is kResourceExhausted.
  virtual Status WriteAt(uint64_t offset, const void* data, size_t n) = 0;

  // Flushes the file's data to the disk (fsync).
  virtual Status Sync() = 0;

  // Flushes the file's data and its size, not its other metadata such as the modification
  // time (fdatasync): what appending to a file needs to be durable.
  virtual Status SyncData() = 0;

  // Cuts the file to `size` bytes, or extends it with zeros (ftruncate); durable after
  // Sync. Errors "<path>: truncate to N bytes: <reason>".
  virtual Status Truncate(uint64_t size) = 0;

  // Drops the file's pages from the page cache (posix_fadvise DONTNEED), so that it is
  // read back from the disk and writing it does not evict other data. Only clean pages
  // are dropped: call after Sync. A hint: errors are ignored.
  virtual void DontNeed() = 0;

  // Closes the descriptor; reports errors a deferred write may only show now. No call
  // but the destructor is allowed afterwards.
  virtual Status Close() = 0;

 protected:
  explicit WritableFile(std::string path) : path_(std::move(path)) {}

 private:
  const std::string path_;
};

class Env {
 public:
  virtual ~Env() = default;

  // Whole-file read of the regular file `path`. Errors as OpenForRead.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;

  // Writes `contents` to a temporary file beside `path`, fsyncs it, renames it over
  // `path` and fsyncs the directory: readers see the old or the new file, never a mix.
  virtual Status WriteFileAtomic(const std::string& path, const std::string& contents) = 0;

  virtual bool FileExists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;

  // Creates `path` and missing parents (mode 0755). OK if it already exists.
  virtual Status CreateDirs(const std::string& path) = 0;

  // Names (not paths) of the entries in `dir`, sorted, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& dir) = 0;

  // A memfd of `size` bytes named `name` (visible in /proc/PID/fd as "memfd:NAME"),
  // sealed against grow/shrink, mapped read-write and shared, zero-filled.
  virtual Result<std::unique_ptr<SharedMemory>> CreateSharedMemory(const std::string& name,
                                                                   size_t size) = 0;
  // As CreateSharedMemory, also sealed against writes through any other mapping or fd
  // (F_SEAL_FUTURE_WRITE): only the returned mapping writes; whoever gets the fd can map
  // it read-only. kFailedPrecondition where the environment has no shared memory.
  virtual Result<std::unique_ptr<SharedMemory>> CreateWriteSealedSharedMemory(
      const std::string& name, size_t /*size*/) {
    return FailedPrecondition("shared memory '" + name + "': not in this environment");
  }

  // Opens the regular file `path` for reading. kNotFound if it does not exist;
  // kInvalidArgument "<path>: not a regular file" (" (a directory)", " (a FIFO)", ...)
  // for anything else, refused without opening it or blocking in open();
  // kResourceExhausted when the process or system is out of descriptors or memory
  // (EMFILE, ENFILE, ENOMEM), so that callers can tell a bad file from a busy system.
  // Other errors are errno's status, "<path>: cannot open: <reason>".
  virtual Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) = 0;

  // Maps all of the regular file `path` read-only (see MappedFile). An empty file is
  // fine: data() is null and size() 0. Errors as OpenForRead, and
  // "<path>: cannot map N bytes: <reason>".
  virtual Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) = 0;

  // Creates the file `path` (mode 0644) for writing; it must not exist (kAlreadyExists).
  // Errors "<path>: create: <reason>".
  virtual Result<std::unique_ptr<WritableFile>> CreateWritableFile(const std::string& path) = 0;

  // Opens the existing regular file `path` for writing (WritableFile), keeping its
  // contents. kNotFound if it does not exist; other errors as OpenForRead's, with
  // "<path>: cannot open for writing: <reason>".
  virtual Result<std::unique_ptr<WritableFile>> OpenWritableFile(const std::string& path) = 0;

  // rename(2): renames `from` to `to`, replacing `to` if it is a file or an empty
  // directory. Errors "<to>: rename from <from>: <reason>".
  virtual Status Rename(const std::string& from, const std::string& to) = 0;

  // Renames `from` to `to` unless `to` exists: then kAlreadyExists and nothing changes.
  // Atomic where the filesystem supports renameat2(RENAME_NOREPLACE); elsewhere `to` is
  // checked, then renamed (a small race with whoever creates `to` in between).
  virtual Status RenameNoReplace(const std::string& from, const std::string& to) = 0;

  // Swaps `a` and `b` (both exist; files or directories) atomically,
  // renameat2(RENAME_EXCHANGE): true. False, changing nothing, where the filesystem
  // cannot (the caller falls back to renames). Errors "<b>: exchange with <a>: <reason>".
  virtual Result<bool> Exchange(const std::string& a, const std::string& b) = 0;

  // Removes `path` and, if it is a directory, everything under it (symlinks are removed,
  // not followed). OK if it does not exist.
  virtual Status RemoveAll(const std::string& path) = 0;

  // fsyncs the directory `dir`, making renames and creations in it durable.
  virtual Status SyncDir(const std::string& dir) = 0;

  // Makes `path` its owner's only, whatever the umask: a directory 0700, a regular file
  // 0600 (for the daemon's state). kFailedPrecondition naming it for anything else (a
  // symlink is not followed); kNotFound if it does not exist.
  virtual Status RestrictToOwner(const std::string& path) = 0;

  // Monotonic clock.
  virtual uint64_t NowMicros() = 0;
};

// The real thing. Never returns null.
std::unique_ptr<Env> NewPosixEnv();

// kInvalidArgument "<path>: not a regular file (a FIFO)" for a file of `mode`.
Status NotRegularFile(const std::string& path, mode_t mode);

// Opens the regular file `path` for reading: a descriptor the caller owns, and the file's
// size in *size. Errors as Env::OpenForRead.
using FileOpener = std::function<Result<int>(const std::string& path, uint64_t* size)>;
// Opens the directory `dir` for listing (O_RDONLY | O_DIRECTORY): a descriptor the caller
// owns. Errors "<dir>: opendir: <reason>".
using DirectoryOpener = std::function<Result<int>(const std::string& dir)>;

// The real thing, opening what it reads (ReadFile, OpenForRead, MapReadOnly) with
// `open_file` and what it lists with `open_dir` (see CallerEnv).
std::unique_ptr<Env> NewPosixEnv(FileOpener open_file, DirectoryOpener open_dir);

}  // namespace ember

#endif  // EMBER_COMMON_ENV_H_
