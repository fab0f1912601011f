#include "daemon/data/tokens/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace ember::daemon {

namespace {

// Closes a descriptor on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus(path + ": cannot open", errno);
  FdCloser closer{fd};

  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(path + ": cannot stat", errno);
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(path + ": not a regular file" +
                           (S_ISDIR(st.st_mode) ? std::string(" (a directory)") : ""));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return std::unique_ptr<MappedFile>(new MappedFile(path, nullptr, 0));

  void* data = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    return ErrnoStatus(path + ": cannot map " + std::to_string(size) + " bytes", errno);
  }
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, static_cast<size_t>(size_));
}

Status MappedFile::Advise(Access access) const {
  if (data_ == nullptr) return Status::Ok();
  int advice = MADV_NORMAL;
  switch (access) {
    case Access::kNormal: advice = MADV_NORMAL; break;
    case Access::kSequential: advice = MADV_SEQUENTIAL; break;
    case Access::kRandom: advice = MADV_RANDOM; break;
  }
  if (::madvise(data_, static_cast<size_t>(size_), advice) != 0) {
    return ErrnoStatus(path_ + ": madvise", errno);
  }
  return Status::Ok();
}

void MappedFile::WillNeed(uint64_t offset, uint64_t length) const {
  if (data_ == nullptr || offset >= size_ || length == 0) return;
  const uint64_t end = length > size_ - offset ? size_ : offset + length;
  const uint64_t start = offset & ~(PageSize() - 1);  // madvise wants a page-aligned start
  (void)::madvise(static_cast<char*>(data_) + start, static_cast<size_t>(end - start),
                  MADV_WILLNEED);
}

}  // namespace ember::daemon
