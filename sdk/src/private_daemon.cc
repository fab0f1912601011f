#include "sdk/src/private_daemon.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/unix_socket.h"

extern char** environ;

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDefaultIdleExitSeconds = 300;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

Status ErrnoError(const std::string& what, int err) {
  return Unavailable("private emberd: " + what + ": " + std::strerror(err));
}

// `dir` made if missing (mode 0700, unless `make` is false), and checked to be the
// caller's own directory that no one else may write to: a socket in another user's
// directory could be theirs.
Status PrivateDir(const std::string& dir, bool make = true) {
  if (make && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return ErrnoError("mkdir " + dir, errno);
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return ErrnoError("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022) != 0)
    return Unavailable("private emberd: " + dir + " is not a directory of uid " +
                       std::to_string(getuid()) + " that only it may write to");
  return Status::Ok();
}

// mkdir -p of `path` (mode 0700 for what it makes).
Status MakeDirs(const std::string& path) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = path.find('/', slash + 1);
    const std::string part = path.substr(0, slash);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoError("mkdir " + part, errno);
  }
  return Status::Ok();
}

// Where the socket, lock and log live: $XDG_RUNTIME_DIR/ember where that directory exists,
// else /tmp/ember-<uid>; made (with `make`) and checked as PrivateDir says.
Result<std::string> RuntimeDir(bool make = true) {
  const std::string xdg = Env("XDG_RUNTIME_DIR");
  struct stat st;
  // The XDG spec: a relative path is to be ignored.
  const bool have_xdg = !xdg.empty() && xdg[0] == '/' && stat(xdg.c_str(), &st) == 0 &&
                        S_ISDIR(st.st_mode);
  const std::string dir = have_xdg ? xdg + "/ember" : "/tmp/ember-" + std::to_string(getuid());
  EMBER_RETURN_IF_ERROR(PrivateDir(dir, make));
  return dir;
}

// The state directory: $XDG_CACHE_HOME/ember, else ~/.cache/ember.
Result<std::string> StateDir() {
  std::string base = Env("XDG_CACHE_HOME");
  if (base.empty() || base[0] != '/') {  // unset, or relative: ignored, as the spec says
    std::string home = Env("HOME");
    if (home.empty()) {
      struct passwd* pw = getpwuid(getuid());
      if (pw != nullptr && pw->pw_dir != nullptr) home = pw->pw_dir;
    }
    if (home.empty())
      return Unavailable("private emberd: no state directory: set XDG_CACHE_HOME or HOME");
    base = home + "/.cache";
  }
  const std::string dir = base + "/ember";
  EMBER_RETURN_IF_ERROR(MakeDirs(dir));
  return dir;
}

// $EMBER_EMBERD, else `emberd` on PATH; an absolute path (the daemon runs from "/").
Result<std::string> Program() {
  const std::string given = Env("EMBER_EMBERD");
  if (!given.empty()) {
    char real[PATH_MAX];
    if (access(given.c_str(), X_OK) != 0 || realpath(given.c_str(), real) == nullptr)
      return ErrnoError("EMBER_EMBERD=" + given, errno);
    return std::string(real);
  }
  const std::string path = Env("PATH");
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = path.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/emberd";
    char real[PATH_MAX];
    if (access(candidate.c_str(), X_OK) == 0 && realpath(candidate.c_str(), real) != nullptr)
      return std::string(real);
    start = end + 1;
  }
  return Unavailable("private emberd: no program to start: EMBER_EMBERD is unset and no "
                     "emberd is on PATH");
}

// The log's last non-empty line, or "" if there is none.
std::string LastLine(const std::string& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// Starts `argv` detached (a session of its own, not a child of this process, working in
// "/" so that it holds no directory of the trainer's; stdout and stderr to `log`, no
// NOTIFY_SOCKET): its pid.
Result<pid_t> Spawn(const std::vector<std::string>& args, const std::string& log) {
  // Everything the children use is made before fork: they only call async-signal-safe
  // functions (this process may have threads).
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "NOTIFY_SOCKET=", 14) != 0) envp.push_back(*e);
  envp.push_back(nullptr);
  int pids[2];
  if (pipe2(pids, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  const pid_t child = fork();
  if (child < 0) {
    const int err = errno;
    close(pids[0]);
    close(pids[1]);
    return ErrnoError("fork", err);
  }
  if (child == 0) {
    setsid();
    const pid_t daemon = fork();
    if (daemon == 0) {
      const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (out >= 0) {
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
      }
      if (in >= 0) dup2(in, STDIN_FILENO);
      if (chdir("/") != 0) _exit(126);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    (void)!write(pids[1], &daemon, sizeof(daemon));
    _exit(daemon < 0 ? 1 : 0);
  }
  close(pids[1]);
  pid_t daemon = -1;
  const ssize_t got = read(pids[0], &daemon, sizeof(daemon));
  close(pids[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof(daemon) || daemon < 0) return Unavailable("private emberd: fork failed");
  return daemon;
}

// An exclusive flock of `path`, tried until `deadline`: the descriptor (closing it unlocks).
Result<int> Lock(const std::string& path, Clock::time_point deadline) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("open " + path, errno);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int err = errno;
      close(fd);
      return ErrnoError("flock " + path, err);
    }
    if (Clock::now() >= deadline) {
      close(fd);
      return Unavailable("private emberd: " + path + " stayed locked (another process of "
                         "this user starting emberd?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fd;
}

}  // namespace

bool AutostartAllowed() { return Env("EMBER_AUTOSTART") != "0"; }

Result<std::string> RunningPrivateDaemon() {
  Result<std::string> dir = RuntimeDir(/*make=*/false);
  if (!dir.ok()) return NotFound("no private emberd of yours runs (" + dir.status().message() + ")");
  const std::string socket = *dir + "/emberd.sock";
  if (!UnixSocketAnswers(socket)) return NotFound("no private emberd of yours answers on " + socket);
  return socket;
}

Result<std::string> EnsurePrivateDaemon(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  EMBER_ASSIGN_OR_RETURN(const std::string dir, RuntimeDir());
  const std::string socket = dir + "/emberd.sock";
  if (socket.size() >= sizeof(sockaddr_un::sun_path))
    return Unavailable("private emberd: the socket path " + socket + " is too long");
  if (UnixSocketAnswers(socket)) return socket;
  EMBER_ASSIGN_OR_RETURN(const int lock, Lock(dir + "/ember.lock", deadline));
  struct Unlock {
    int fd;
    ~Unlock() { close(fd); }
  } unlock{lock};
  if (UnixSocketAnswers(socket)) return socket;  // another process started it meanwhile
  EMBER_ASSIGN_OR_RETURN(const std::string state, StateDir());
  EMBER_ASSIGN_OR_RETURN(const std::string program, Program());
  std::string idle = Env("EMBER_IDLE_EXIT");
  if (idle.empty()) idle = std::to_string(kDefaultIdleExitSeconds);
  const std::string log = dir + "/emberd.log";
  EMBER_ASSIGN_OR_RETURN(
      const pid_t pid,
      Spawn({program, "--socket", socket, "--state-dir", state, "--idle-exit", idle}, log));
  while (!UnixSocketAnswers(socket)) {
    if (kill(pid, 0) != 0 && errno == ESRCH)
      return Unavailable("private emberd (" + program + ") exited before serving on " +
                         socket + "; the last line of " + log + ": " + LastLine(log));
    if (Clock::now() >= deadline)
      return Unavailable("private emberd (" + program + ", pid " + std::to_string(pid) +
                         ") did not answer on " + socket + " within " +
                         std::to_string(timeout.count()) + " ms; the last line of " + log +
                         ": " + LastLine(log));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return socket;
}

}  // namespace ember
