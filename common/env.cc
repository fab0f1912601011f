#include "common/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/mapping_guard.h"

namespace ember {

Status MappedFile::ShrunkError() const {
  return DataLoss(path_ + ": the file shrank below the " + std::to_string(size_) +
                  " bytes it had when it was opened (truncated while being read?); register "
                  "it again once it is whole");
}

Status NotRegularFile(const std::string& path, mode_t mode) {
  const char* kind = S_ISDIR(mode)    ? " (a directory)"
                     : S_ISFIFO(mode) ? " (a FIFO)"
                     : S_ISCHR(mode)  ? " (a character device)"
                     : S_ISBLK(mode)  ? " (a block device)"
                     : S_ISSOCK(mode) ? " (a socket)"
                                      : "";
  return InvalidArgument(path + ": not a regular file" + kind);
}

SharedMemory::~SharedMemory() {
  if (data_ != nullptr && data_ != MAP_FAILED) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
}

Status ReadableFile::ReadAt(uint64_t offset, size_t n, void* dst) const {
  char* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    EMBER_ASSIGN_OR_RETURN(const size_t got, ReadSome(offset + done, n - done, out + done));
    if (got == 0) {
      return DataLoss(path_ + ": truncated while reading: " + std::to_string(done) + " of " +
                      std::to_string(n) + " bytes from byte " + std::to_string(offset));
    }
    done += got;
  }
  return Status::Ok();
}

namespace {

// Closes a descriptor on scope exit unless released.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status FsyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(dir + ": open directory", errno);
  FdCloser closer(fd);
  if (fsync(fd) != 0) return ErrnoStatus(dir + ": fsync directory", errno);
  return Status::Ok();
}

// errno of an open(): no descriptors left is the system's state, not the file's fault
// (ErrnoStatus already makes ENOMEM kResourceExhausted); an existing file is
// kAlreadyExists.
Status OpenErrnoStatus(const std::string& what, int err) {
  if (err == EMFILE || err == ENFILE) return ResourceExhausted(what + ": " + std::strerror(err));
  if (err == EEXIST) return AlreadyExists(what + ": " + std::strerror(err));
  return ErrnoStatus(what, err);
}


// Opens `path` (`flags`: O_RDONLY or O_WRONLY) and checks that it is a regular file;
// *size is its size. Anything else is refused before it is opened (a device's open may
// act on it) and opened without blocking (a FIFO swapped in meanwhile has no writer to
// wait for), then checked again on the descriptor.
Result<int> OpenRegularFile(const std::string& path, uint64_t* size, int flags = O_RDONLY) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return NotRegularFile(path, st.st_mode);
  int fd;
  do {
    fd = open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const char* what = flags == O_RDONLY ? ": cannot open" : ": cannot open for writing";
    return OpenErrnoStatus(path + what, errno);
  }
  FdCloser closer(fd);
  if (fstat(fd, &st) != 0) return ErrnoStatus(path + ": cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return NotRegularFile(path, st.st_mode);
  // O_NONBLOCK stays: it has no effect on a regular file's reads and writes (open(2)), and
  // clearing it would cost two more system calls per file (the folder format opens one
  // per sample).
  *size = static_cast<uint64_t>(st.st_size);
  return closer.Release();
}

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

class PosixReadableFile : public ReadableFile {
 public:
  PosixReadableFile(std::string path, uint64_t size, int fd)
      : ReadableFile(std::move(path), size), fd_(fd) {}
  ~PosixReadableFile() override { close(fd_); }

  Result<size_t> ReadSome(uint64_t offset, size_t n, void* dst) const override {
    while (true) {
      const ssize_t got = pread(fd_, dst, n, static_cast<off_t>(offset));
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) {
        return ErrnoStatus(path() + ": read failed at byte " + std::to_string(offset), errno);
      }
    }
  }

  void WillNeed() const override { (void)posix_fadvise(fd_, 0, 0, POSIX_FADV_WILLNEED); }

 private:
  const int fd_;
};

class PosixMappedFile : public MappedFile {
 public:
  PosixMappedFile(std::string path, const char* data, uint64_t size)
      : MappedFile(std::move(path), data, size) {
    if (!GuardMapping(data, static_cast<size_t>(size), &shrunk_))
      std::fprintf(stderr, "emberd: %s: %zu mappings are guarded already; a truncate of this "
                   "file while it is read ends the process\n", this->path().c_str(),
                   kMaxGuardedMappings);
  }
  ~PosixMappedFile() override {
    UnguardMapping(data());
    if (data() != nullptr) munmap(const_cast<char*>(data()), static_cast<size_t>(size()));
  }

  Status Advise(Access access) const override {
    if (data() == nullptr) return Status::Ok();
    int advice = MADV_NORMAL;
    switch (access) {
      case Access::kNormal: advice = MADV_NORMAL; break;
      case Access::kSequential: advice = MADV_SEQUENTIAL; break;
      case Access::kRandom: advice = MADV_RANDOM; break;
    }
    if (madvise(const_cast<char*>(data()), static_cast<size_t>(size()), advice) != 0) {
      return ErrnoStatus(path() + ": madvise", errno);
    }
    return Status::Ok();
  }

  void WillNeed(uint64_t offset, uint64_t length) const override {
    if (data() == nullptr || offset >= size() || length == 0) return;
    const uint64_t end = length > size() - offset ? size() : offset + length;
    const uint64_t start = offset & ~(PageSize() - 1);  // madvise wants a page-aligned start
    (void)madvise(const_cast<char*>(data()) + start, static_cast<size_t>(end - start),
                  MADV_WILLNEED);
  }
};

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : WritableFile(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) close(fd_);
  }

  Status WriteAt(uint64_t offset, const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t written = pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (written < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(path() + ": write " + std::to_string(n) + " bytes at byte " +
                               std::to_string(offset),
                           errno);
      }
      p += written;
      offset += static_cast<uint64_t>(written);
      n -= static_cast<size_t>(written);
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (fsync(fd_) != 0) return ErrnoStatus(path() + ": fsync", errno);
    return Status::Ok();
  }

  Status SyncData() override {
    if (fdatasync(fd_) != 0) return ErrnoStatus(path() + ": fdatasync", errno);
    return Status::Ok();
  }

  Status Truncate(uint64_t size) override {
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return ErrnoStatus(path() + ": truncate to " + std::to_string(size) + " bytes", errno);
    }
    return Status::Ok();
  }

  void DontNeed() override { (void)posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED); }

  Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) return ErrnoStatus(path() + ": close", errno);
    return Status::Ok();
  }

 private:
  int fd_;  // -1 once closed
};

Result<int> OpenDirectory(const std::string& dir) {
  int fd;
  do {
    fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return OpenErrnoStatus(dir + ": opendir", errno);
  return fd;
}

class PosixEnv final : public Env {
 public:
  PosixEnv(FileOpener open_file, DirectoryOpener open_dir)
      : open_file_(std::move(open_file)), open_dir_(std::move(open_dir)) {}

  Result<std::string> ReadFile(const std::string& path) override {
    uint64_t size = 0;
    EMBER_ASSIGN_OR_RETURN(const int fd, open_file_(path, &size));
    FdCloser closer(fd);
    std::string contents;
    size_t filled = 0;
    contents.resize(static_cast<size_t>(size));
    while (filled < contents.size()) {
      ssize_t n = read(fd, &contents[filled], contents.size() - filled);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(path + ": read", errno);
      }
      if (n == 0) break;
      filled += static_cast<size_t>(n);
    }
    contents.resize(filled);
    // Reads on until EOF rather than trusting st_size (it may have grown; /proc says 0).
    char buffer[64 * 1024];
    while (true) {
      ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(path + ": read", errno);
      }
      if (n == 0) break;
      contents.append(buffer, static_cast<size_t>(n));
    }
    return contents;
  }

  Status WriteFileAtomic(const std::string& path, const std::string& contents) override {
    static std::atomic<uint64_t> counter{0};
    const std::string tmp =
        path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, CreateWritableFile(tmp));
    Status status = file->WriteAt(0, contents.data(), contents.size());
    if (status.ok()) status = file->Sync();
    const Status closed = file->Close();
    if (status.ok()) status = closed;
    if (status.ok()) status = Rename(tmp, path);
    if (!status.ok()) {
      unlink(tmp.c_str());
      return status;
    }
    return SyncDir(DirName(path));
  }

  bool FileExists(const std::string& path) override {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }

  bool IsDirectory(const std::string& path) override {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  Status RestrictToOwner(const std::string& path) override {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) return ErrnoStatus(path + ": lstat", errno);
    mode_t mode;
    if (S_ISDIR(st.st_mode)) mode = 0700;
    else if (S_ISREG(st.st_mode)) mode = 0600;
    else return FailedPrecondition(path + ": not a directory or a regular file");
    if ((st.st_mode & 07777) == mode) return Status::Ok();
    if (chmod(path.c_str(), mode) != 0) return ErrnoStatus(path + ": chmod", errno);
    return Status::Ok();
  }

  Status CreateDirs(const std::string& path) override {
    if (path.empty()) return InvalidArgument("CreateDirs: empty path");
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      const std::string prefix = path.substr(0, pos);
      if (prefix.empty() || prefix.back() == '/') continue;  // "//" in the path
      if (mkdir(prefix.c_str(), 0755) == 0) continue;
      int err = errno;
      if (err != EEXIST) return ErrnoStatus(prefix + ": mkdir", err);
      if (!IsDirectory(prefix)) return ErrnoStatus(prefix + ": mkdir", ENOTDIR);
    }
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    EMBER_ASSIGN_OR_RETURN(const int fd, open_dir_(dir));
    DIR* d = fdopendir(fd);
    if (d == nullptr) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(dir + ": opendir", err);
    }
    std::vector<std::string> names;
    while (true) {
      errno = 0;
      struct dirent* entry = readdir(d);
      if (entry == nullptr) {
        int err = errno;
        closedir(d);
        if (err != 0) return ErrnoStatus(dir + ": readdir", err);
        break;
      }
      std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  Result<std::unique_ptr<SharedMemory>> CreateSharedMemory(const std::string& name,
                                                           size_t size) override {
    return MakeSharedMemory(name, size, /*seal_writes=*/false);
  }

  Result<std::unique_ptr<SharedMemory>> CreateWriteSealedSharedMemory(const std::string& name,
                                                                      size_t size) override {
    return MakeSharedMemory(name, size, /*seal_writes=*/true);
  }

  static Result<std::unique_ptr<SharedMemory>> MakeSharedMemory(const std::string& name,
                                                                size_t size, bool seal_writes) {
    const std::string what = "shared memory '" + name + "'";
    if (size == 0) return InvalidArgument(what + ": size must be positive");
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return ErrnoStatus(what + ": memfd_create", errno);
    FdCloser closer(fd);
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      return ErrnoStatus(what + ": ftruncate to " + std::to_string(size) + " bytes", errno);
    }
    void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      return ErrnoStatus(what + ": mmap " + std::to_string(size) + " bytes", errno);
    }
    // F_SEAL_FUTURE_WRITE keeps the mapping above writable and refuses any later one.
    const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL |
                      (seal_writes ? F_SEAL_FUTURE_WRITE : 0);
    if (fcntl(fd, F_ADD_SEALS, seals) != 0) {
      const int err = errno;
      munmap(data, size);
      return ErrnoStatus(what + ": seal", err);
    }
    return std::make_unique<SharedMemory>(closer.Release(), data, size);
  }

  Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    uint64_t size = 0;
    EMBER_ASSIGN_OR_RETURN(const int fd, open_file_(path, &size));
    return std::unique_ptr<ReadableFile>(std::make_unique<PosixReadableFile>(path, size, fd));
  }

  Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) override {
    uint64_t size = 0;
    EMBER_ASSIGN_OR_RETURN(const int fd, open_file_(path, &size));
    FdCloser closer(fd);  // the mapping outlives the descriptor
    if (size == 0) {
      return std::unique_ptr<MappedFile>(std::make_unique<PosixMappedFile>(path, nullptr, 0));
    }
    void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      return ErrnoStatus(path + ": cannot map " + std::to_string(size) + " bytes", errno);
    }
    return std::unique_ptr<MappedFile>(
        std::make_unique<PosixMappedFile>(path, static_cast<const char*>(data), size));
  }

  Result<std::unique_ptr<WritableFile>> CreateWritableFile(const std::string& path) override {
    int fd;
    do {
      fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return OpenErrnoStatus(path + ": create", errno);
    return std::unique_ptr<WritableFile>(std::make_unique<PosixWritableFile>(path, fd));
  }

  Result<std::unique_ptr<WritableFile>> OpenWritableFile(const std::string& path) override {
    uint64_t size = 0;
    EMBER_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &size, O_WRONLY));
    return std::unique_ptr<WritableFile>(std::make_unique<PosixWritableFile>(path, fd));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(to + ": rename from " + from, errno);
    }
    return Status::Ok();
  }

  Status RenameNoReplace(const std::string& from, const std::string& to) override {
    if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
      return Status::Ok();
    }
    const int err = errno;
    if (err == EEXIST || err == ENOTEMPTY) return AlreadyExists(to + ": already exists");
    if (err != EINVAL && err != ENOSYS) return ErrnoStatus(to + ": rename from " + from, err);
    // The filesystem cannot refuse to replace: check, then rename (a small race).
    struct stat st;
    if (lstat(to.c_str(), &st) == 0) return AlreadyExists(to + ": already exists");
    return Rename(from, to);
  }

  Result<bool> Exchange(const std::string& a, const std::string& b) override {
    if (renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
    const int err = errno;
    if (err == EINVAL || err == ENOSYS) return false;  // not supported here
    return ErrnoStatus(b + ": exchange with " + a, err);
  }

  Status RemoveAll(const std::string& path) override {
    std::error_code error;
    std::filesystem::remove_all(path, error);
    if (error) return ErrnoStatus(path + ": remove", error.value());
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override { return FsyncDir(dir); }

  uint64_t NowMicros() override {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
  }

 private:
  const FileOpener open_file_;      // for reading
  const DirectoryOpener open_dir_;  // for listing
};

}  // namespace

std::unique_ptr<Env> NewPosixEnv() {
  return NewPosixEnv([](const std::string& path, uint64_t* size) { return OpenRegularFile(path, size); },
                     OpenDirectory);
}

std::unique_ptr<Env> NewPosixEnv(FileOpener open_file, DirectoryOpener open_dir) {
  return std::make_unique<PosixEnv>(std::move(open_file), std::move(open_dir));
}

}  // namespace ember
