// MappedFile: a whole file mapped read-only into memory (mmap), for formats whose files
// are too large to read into memory (token streams of tens of GB). Env has no mapping
// call yet; this class is the seam that would move there.
#ifndef EMBER_DAEMON_DATA_TOKENS_MAPPED_FILE_H_
#define EMBER_DAEMON_DATA_TOKENS_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ember/status.h"

namespace ember::daemon {

// Immutable after Open: every const method is safe to call from any thread. The mapping
// lives until destruction; the descriptor is closed right after mapping.
//
// Caveat (as with any mmap): if another process truncates the file while it is mapped,
// touching the lost pages raises SIGBUS. Token files are written once and then read.
class MappedFile {
 public:
  // How the mapping will be read next, for the kernel's readahead (madvise).
  enum class Access { kNormal, kSequential, kRandom };

  // Opens `path` read-only and maps all of it, shared (page cache, no copy). An empty
  // file is fine: data() is null and size() 0. Errors name the path: kNotFound if it does
  // not exist, kInvalidArgument if it is not a regular file, else errno's status.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const char* data() const { return static_cast<const char*>(data_); }
  uint64_t size() const { return size_; }

  // Sets the readahead policy for the whole mapping. Errors name the path.
  Status Advise(Access access) const;

  // Starts reading bytes [offset, offset + length) into the page cache (MADV_WILLNEED)
  // without waiting for them; the range is clamped to the file. A hint: failures are
  // ignored.
  void WillNeed(uint64_t offset, uint64_t length) const;

 private:
  MappedFile(std::string path, void* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  const std::string path_;
  void* const data_;  // null iff size_ == 0
  const uint64_t size_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_TOKENS_MAPPED_FILE_H_
