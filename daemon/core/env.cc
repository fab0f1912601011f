#include "daemon/core/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>

namespace ember::daemon {

SharedMemory::~SharedMemory() {
  if (data_ != nullptr && data_ != MAP_FAILED) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
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

Status WriteAll(int fd, const std::string& contents, const std::string& path) {
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(path + ": write", errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(dir + ": open directory", errno);
  FdCloser closer(fd);
  if (fsync(fd) != 0) return ErrnoStatus(dir + ": fsync directory", errno);
  return Status::Ok();
}

class PosixEnv : public Env {
 public:
  Result<std::string> ReadFile(const std::string& path) override {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(path + ": open", errno);
    FdCloser closer(fd);
    std::string contents;
    size_t filled = 0;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      contents.resize(static_cast<size_t>(st.st_size));
    }
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
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus(tmp + ": create", errno);
    Status status = WriteAll(fd, contents, tmp);
    if (status.ok() && fsync(fd) != 0) status = ErrnoStatus(tmp + ": fsync", errno);
    if (close(fd) != 0 && status.ok()) status = ErrnoStatus(tmp + ": close", errno);
    if (status.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
      status = ErrnoStatus(path + ": rename from " + tmp, errno);
    }
    if (!status.ok()) {
      unlink(tmp.c_str());
      return status;
    }
    return FsyncDir(DirName(path));
  }

  bool FileExists(const std::string& path) override {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }

  bool IsDirectory(const std::string& path) override {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
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
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus(dir + ": opendir", errno);
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
    const std::string what = "shared memory '" + name + "'";
    if (size == 0) return InvalidArgument(what + ": size must be positive");
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return ErrnoStatus(what + ": memfd_create", errno);
    FdCloser closer(fd);
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      return ErrnoStatus(what + ": ftruncate to " + std::to_string(size) + " bytes", errno);
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      return ErrnoStatus(what + ": seal", errno);
    }
    void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      return ErrnoStatus(what + ": mmap " + std::to_string(size) + " bytes", errno);
    }
    return std::make_unique<SharedMemory>(closer.Release(), data, size);
  }

  uint64_t NowMicros() override {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
  }
};

}  // namespace

std::unique_ptr<Env> NewPosixEnv() { return std::make_unique<PosixEnv>(); }

}  // namespace ember::daemon
