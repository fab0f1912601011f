#include "tests/support/as_user.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace ember::testing {
namespace {

void WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(3);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// A message: its length (uint32) and its bytes.
void SendMessage(int fd, const std::string& text) {
  const uint32_t size = static_cast<uint32_t>(text.size());
  WriteAll(fd, &size, sizeof(size));
  WriteAll(fd, text.data(), text.size());
}

// Reads n bytes before `deadline`; false on EOF or timeout.
bool ReadAll(int fd, void* data, size_t n, std::chrono::steady_clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

[[noreturn]] void BecomeAndRun(const User& user, const AsUser::Body& body, int out, int in) {
  if (setgroups(user.groups.size(), user.groups.data()) != 0 ||
      setresgid(user.gid, user.gid, user.gid) != 0 || setresuid(user.uid, user.uid, user.uid) != 0) {
    SendMessage(out, std::string("cannot become uid ") + std::to_string(user.uid) + ": " +
                         std::strerror(errno));
    _exit(2);
  }
  auto checkpoint = [out, in](const std::string& text) {
    SendMessage(out, text);
    char go;
    if (read(in, &go, 1) != 1) _exit(0);  // the test is gone
  };
  std::string result;
  try {
    result = body(checkpoint);
  } catch (const std::exception& e) {
    result = std::string("exception: ") + e.what();
  }
  SendMessage(out, result);
  _exit(0);
}

}  // namespace

bool CanSwitchUsers() { return geteuid() == 0; }

AsUser::AsUser(const User& user, Body body) {
  int up[2], down[2];
  if (pipe2(up, O_CLOEXEC) != 0 || pipe2(down, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    close(up[0]);
    close(down[1]);
    BecomeAndRun(user, body, up[1], down[0]);
  }
  close(up[1]);
  close(down[0]);
  from_child_ = up[0];
  to_child_ = down[1];
}

AsUser::~AsUser() {
  close(to_child_);
  close(from_child_);
  if (pid_ > 0) {
    // The child ends when it sees the pipe close at a checkpoint; if it is stuck, kill it.
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      usleep(20000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string AsUser::Next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  uint32_t size = 0;
  if (!ReadAll(from_child_, &size, sizeof(size), deadline))
    throw std::runtime_error("the child of pid " + std::to_string(pid_) +
                             " said nothing within " + std::to_string(timeout.count()) + " ms");
  std::string text(size, '\0');
  if (!ReadAll(from_child_, text.data(), size, deadline))
    throw std::runtime_error("the child's message was cut short");
  return text;
}

void AsUser::Continue() {
  const char go = 1;
  if (write(to_child_, &go, 1) != 1) throw std::runtime_error("the child is gone");
}

std::string RunAs(const User& user, const std::function<std::string()>& body) {
  AsUser child(user, [&body](const AsUser::Checkpoint&) { return body(); });
  return child.Next();
}

}  // namespace ember::testing
