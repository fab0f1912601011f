#include "common/caller_env.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "common/env_wrapper.h"

namespace ember {

bool Credentials::InGroup(gid_t g) const {
  return g == gid || std::find(groups.begin(), groups.end(), g) != groups.end();
}

bool ModeAllows(const Credentials& creds, const struct stat& st, int want) {
  if (creds.uid == 0) {
    // Root reads and searches anything; it executes a file only if someone may.
    return (want & X_OK) == 0 || S_ISDIR(st.st_mode) || (st.st_mode & 0111) != 0;
  }
  mode_t bits;
  if (st.st_uid == creds.uid) {
    bits = (st.st_mode >> 6) & 7;
  } else if (creds.InGroup(st.st_gid)) {
    bits = (st.st_mode >> 3) & 7;
  } else {
    bits = st.st_mode & 7;
  }
  mode_t need = 0;
  if (want & R_OK) need |= 4;
  if (want & W_OK) need |= 2;
  if (want & X_OK) need |= 1;
  return (bits & need) == need;
}

namespace {

Status Denied(const std::string& path, const Credentials& creds, const std::string& what) {
  return PermissionDenied(path + ": permission denied for uid " + std::to_string(creds.uid) +
                          " (" + what + ")");
}

// `path` with every symlink resolved, as `creds` could resolve it: a directory is looked
// into only once the caller may search it, so a name inside one the caller may not
// search is never looked up, and whether it exists is never told (realpath() with the
// daemon's rights, CAP_DAC_READ_SEARCH or root, said "no such file" for a missing name
// and "permission denied" for one there). kNotFound if a name on the way does not exist.
Result<std::string> ResolveAs(const std::string& path, const Credentials& creds) {
  constexpr int kMaxSymlinks = 40;  // as the kernel's path walk
  std::string todo = path;          // what is left to walk, '/'-separated
  if (todo.empty() || todo[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) return ErrnoStatus(path + ": getcwd", errno);
    todo = std::string(cwd) + "/" + todo;
  }
  std::string real;  // resolved so far; "" is "/"
  int symlinks = 0;
  size_t at = 0;
  while (at < todo.size()) {
    size_t end = todo.find('/', at);
    if (end == std::string::npos) end = todo.size();
    const std::string name = todo.substr(at, end - at);
    at = end + 1;
    if (name.empty() || name == ".") continue;
    const std::string dir = real.empty() ? "/" : real;
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) return ErrnoStatus(path + ": stat " + dir, errno);
    if (!S_ISDIR(st.st_mode)) return NotFound(path + ": no such file or directory");
    if (!ModeAllows(creds, st, X_OK)) return Denied(path, creds, "search " + dir);
    if (name == "..") {
      real.resize(real.empty() ? 0 : real.rfind('/'));
      continue;
    }
    const std::string next = real + "/" + name;
    if (lstat(next.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) return NotFound(path + ": no such file or directory");
      return ErrnoStatus(path + ": cannot resolve", err);
    }
    if (!S_ISLNK(st.st_mode)) {
      real = next;
      continue;
    }
    if (++symlinks > kMaxSymlinks) return ErrnoStatus(path + ": cannot resolve", ELOOP);
    char target[PATH_MAX];
    const ssize_t n = readlink(next.c_str(), target, sizeof(target) - 1);
    if (n < 0) return ErrnoStatus(path + ": cannot resolve", errno);
    const std::string link(target, static_cast<size_t>(n));
    todo = link + "/" + (at < todo.size() ? todo.substr(at) : std::string());
    at = 0;
    if (!link.empty() && link[0] == '/') real.clear();
  }
  return real.empty() ? std::string("/") : real;
}

// Every directory that holds `real` (an absolute path without symlinks) must be
// searchable by `creds`.
Status CheckSearch(const std::string& path, const std::string& real, const Credentials& creds) {
  for (size_t slash = 0; slash != std::string::npos && slash < real.size();
       slash = real.find('/', slash + 1)) {
    const std::string dir = slash == 0 ? "/" : real.substr(0, slash);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) return ErrnoStatus(path + ": stat " + dir, errno);
    if (!ModeAllows(creds, st, X_OK)) return Denied(path, creds, "search " + dir);
  }
  return Status::Ok();
}

// True if realpath() gives `path` back whenever none of its components is a symlink:
// absolute, no empty, "." or ".." component, no trailing slash.
bool LooksResolved(const std::string& path) {
  if (path.size() < 2 || path[0] != '/' || path.back() == '/') return false;
  for (size_t start = 1; start < path.size();) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string_view component(path.data() + start, end - start);
    if (component.empty() || component == "." || component == "..") return false;
    start = end + 1;
  }
  return true;
}

// openat2 refusing every symlink on the way (ELOOP); ENOSYS before Linux 5.6.
int OpenAt2NoSymlinks(const std::string& path, int flags) {
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd;
  do {
    fd = static_cast<int>(syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof(how)));
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// Whether this kernel has openat2 (Linux 5.6).
bool HaveOpenAt2() {
  static const bool have = [] {
    const int fd = OpenAt2NoSymlinks("/", O_PATH | O_CLOEXEC);
    if (fd >= 0) close(fd);
    return fd >= 0 || errno != ENOSYS;
  }();
  return have;
}

// Opens `real` without following any symlink (one swapped in since it was resolved).
int OpenNoSymlinks(const std::string& real, int flags) {
  int fd = OpenAt2NoSymlinks(real, flags);
  if (fd < 0 && errno == ENOSYS) {  // before Linux 5.6: only the last component is checked
    do {
      fd = open(real.c_str(), flags | O_NOFOLLOW);
    } while (fd < 0 && errno == EINTR);
  }
  return fd;
}

// kPermissionDenied for a path in /proc (given or resolved): /proc/self/fd/N and
// /proc/<pid>/... name the daemon's own descriptors and files, never a user's data.
Status CheckNotProc(const std::string& path, const std::string& real) {
  for (const std::string* p : {&path, &real}) {
    if (*p == "/proc" || p->rfind("/proc/", 0) == 0)
      return PermissionDenied(path + ": /proc is not data (its entries name emberd's own "
                              "descriptors and files)");
  }
  return Status::Ok();
}

Status OpenError(const std::string& path, const std::string& what, int err) {
  if (err == ELOOP) return PermissionDenied(path + ": " + what + ": changed to a symlink while opened");
  if (err == EMFILE || err == ENFILE) return ResourceExhausted(path + ": " + what + ": " + std::strerror(err));
  return ErrnoStatus(path + ": " + what, err);
}

class CallerEnv final : public EnvWrapper {
 public:
  CallerEnv(Env* base, Credentials creds)
      : EnvWrapper(base),
        creds_(std::move(creds)),
        reads_(NewPosixEnv(
            [this](const std::string& path, uint64_t* size) { return OpenFile(path, size); },
            [this](const std::string& dir) { return OpenDir(dir); })) {}

  Result<std::string> ReadFile(const std::string& path) override { return reads_->ReadFile(path); }
  Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    return reads_->OpenForRead(path);
  }
  Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& path) override {
    return reads_->MapReadOnly(path);
  }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return reads_->ListDir(dir);
  }

  bool FileExists(const std::string& path) override { return Searchable(path).ok(); }
  bool IsDirectory(const std::string& path) override {
    auto real = Searchable(path);
    struct stat st;
    return real.ok() && stat(real->c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

 private:
  // The resolved path, once every directory on it is searchable.
  Result<std::string> Searchable(const std::string& path) const {
    EMBER_RETURN_IF_ERROR(CheckNotProc(path, path));
    EMBER_ASSIGN_OR_RETURN(std::string real, ResolveAs(path, creds_));
    EMBER_RETURN_IF_ERROR(CheckNotProc(path, real));
    EMBER_RETURN_IF_ERROR(CheckSearch(path, real, creds_));
    return real;
  }

  Result<int> OpenFile(const std::string& path, uint64_t* size) const {
    // Most paths hold no symlink (an image folder's files, under a root resolved when the
    // dataset was registered). Such a path is its own realpath(), which costs a readlink
    // per component: it is checked and opened as it is, and the open refuses any symlink
    // on the way, so that a success means the checks were on the real path. Whatever
    // fails that way goes the whole way round, which decides and names the error.
    EMBER_RETURN_IF_ERROR(CheckNotProc(path, path));
    if (HaveOpenAt2() && LooksResolved(path)) {
      Result<int> fd = OpenRegular(path, path, /*resolved=*/false, size);
      if (fd.ok()) return fd;
    }
    EMBER_ASSIGN_OR_RETURN(const std::string real, Searchable(path));
    return OpenRegular(path, real, /*resolved=*/true, size);
  }

  // Opens the regular file `real` (`path`, resolved if `resolved`) once every directory
  // on the way is searchable and the file readable by the caller. Unresolved: only with
  // openat2, which refuses every symlink on the way.
  // The file is first opened O_PATH (which opens nothing: no device acts, no FIFO waits)
  // and checked on that descriptor, regular and readable by the caller; only then is that
  // same inode opened for reading (through /proc/self/fd), so a file the caller may not
  // read is never opened, even one swapped in after the checks.
  Result<int> OpenRegular(const std::string& path, const std::string& real, bool resolved,
                          uint64_t* size) const {
    if (!resolved) EMBER_RETURN_IF_ERROR(CheckSearch(path, real, creds_));
    const int path_flags = O_PATH | O_CLOEXEC;
    const int where = resolved ? OpenNoSymlinks(real, path_flags)
                               : OpenAt2NoSymlinks(real, path_flags);
    if (where < 0) return OpenError(path, "cannot open", errno);
    struct stat st;
    Status checked = CheckOpened(path, where, &st, R_OK, "read");
    if (checked.ok() && !S_ISREG(st.st_mode)) checked = NotRegularFile(path, st.st_mode);
    if (!checked.ok()) {
      close(where);
      return checked;
    }
    const std::string self = "/proc/self/fd/" + std::to_string(where);
    int fd;
    do {
      fd = open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    } while (fd < 0 && errno == EINTR);
    const int err = errno;
    close(where);
    if (fd < 0) return OpenError(path, "cannot open", err);
    checked = CheckOpened(path, fd, &st, R_OK, "read");
    if (checked.ok() && !S_ISREG(st.st_mode)) checked = NotRegularFile(path, st.st_mode);
    const int fl = fcntl(fd, F_GETFL);
    if (checked.ok() && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0))
      checked = ErrnoStatus(path + ": fcntl", errno);
    if (!checked.ok()) {
      close(fd);
      return checked;
    }
    *size = static_cast<uint64_t>(st.st_size);
    return fd;
  }

  Result<int> OpenDir(const std::string& dir) const {
    EMBER_ASSIGN_OR_RETURN(const std::string real, Searchable(dir));
    const int fd = OpenNoSymlinks(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return OpenError(dir, "opendir", errno);
    struct stat st;
    Status checked = CheckOpened(dir, fd, &st, R_OK | X_OK, "list");
    if (!checked.ok()) {
      close(fd);
      return checked;
    }
    return fd;
  }

  // The opened file's own permission, on its descriptor (what was opened, whatever the
  // path says now).
  Status CheckOpened(const std::string& path, int fd, struct stat* st, int want,
                     const char* what) const {
    if (fstat(fd, st) != 0) return ErrnoStatus(path + ": cannot stat", errno);
    if (!ModeAllows(creds_, *st, want)) return Denied(path, creds_, what);
    return Status::Ok();
  }

  const Credentials creds_;
  const std::unique_ptr<Env> reads_;  // opens through OpenFile / OpenDir
};

}  // namespace

std::unique_ptr<Env> NewCallerEnv(Env* base, Credentials creds) {
  return std::make_unique<CallerEnv>(base, std::move(creds));
}

std::shared_ptr<Env> EnvReadingAs(Env* base, const std::optional<Credentials>& creds) {
  if (!creds) return std::shared_ptr<Env>(base, [](Env*) {});
  return NewCallerEnv(base, *creds);
}

}  // namespace ember
