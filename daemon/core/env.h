// Env: every piece of OS access the daemon's core needs (files, directories, shared
// memory, the clock), behind one interface so tests can inject faults (as LevelDB's Env).
// main() creates the one PosixEnv and passes it down; there is no global instance.
//
// Thread-safety: implementations are safe to call from any thread.
// Errors: errno is converted here, once, into a Status that names the path.
#ifndef EMBER_DAEMON_CORE_ENV_H_
#define EMBER_DAEMON_CORE_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/status.h"

namespace ember::daemon {

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

class Env {
 public:
  virtual ~Env() = default;

  // Whole-file read. kNotFound if it does not exist.
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

  // Monotonic clock.
  virtual uint64_t NowMicros() = 0;
};

// The real thing. Never returns null.
std::unique_ptr<Env> NewPosixEnv();

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CORE_ENV_H_
