// emberd tells systemd it is ready (Type=notify): with NOTIFY_SOCKET set, it sends
// READY=1 once it serves on its socket, and STOPPING=1 on SIGTERM; with WATCHDOG_USEC
// set it pings WATCHDOG=1 at half that interval.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <vector>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

// Waits up to `timeout_ms` for one datagram.
std::string Receive(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[512];
  ssize_t n = recv(fd, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// A datagram socket bound at `path`, as systemd's NOTIFY_SOCKET.
int BindNotifySocket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// The arrival times of the WATCHDOG=1 datagrams over `span`.
std::vector<std::chrono::steady_clock::time_point> WatchdogPings(int fd,
                                                                 std::chrono::milliseconds span) {
  std::vector<std::chrono::steady_clock::time_point> pings;
  const auto end = std::chrono::steady_clock::now() + span;
  while (std::chrono::steady_clock::now() < end) {
    if (Receive(fd, 50).find("WATCHDOG=1") != std::string::npos)
      pings.push_back(std::chrono::steady_clock::now());
  }
  return pings;
}

// SIGTERM; the daemon must exit 0.
void StopCleanly(pid_t pid) {
  REQUIRE(kill(pid, SIGTERM) == 0);
  const int status = WaitFor(pid, std::chrono::seconds(20));
  CHECK((status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

TEST_CASE("emberd sends READY=1 when it serves and STOPPING=1 when it stops") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string notify_path = dir + "/notify.sock";
  int fd = BindNotifySocket(notify_path);

  pid_t pid =
      Spawn(EmberdCommand(dir), {"NOTIFY_SOCKET=" + notify_path}, dir + "/log", dir + "/log");
  const std::string ready = Receive(fd, 20000);
  INFO(ReadFileOrEmpty(dir + "/log"));
  CHECK(ready.find("READY=1") != std::string::npos);
  // Ready means serving: a client can connect right away.
  ClientOptions options;
  options.socket_path = dir + "/emberd.sock";
  CHECK(Client::Connect(options).ok());

  REQUIRE(kill(pid, SIGTERM) == 0);
  CHECK(Receive(fd, 20000).find("STOPPING=1") != std::string::npos);
  const int status = WaitFor(pid, std::chrono::seconds(20));
  CHECK((status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0));
  close(fd);
}

TEST_CASE("with WATCHDOG_USEC emberd pings WATCHDOG=1 from its event loop at half of it") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string notify_path = dir + "/notify.sock";
  int fd = BindNotifySocket(notify_path);
  // 400 ms: a ping every 200 ms.
  pid_t pid = Spawn(EmberdCommand(dir), {"NOTIFY_SOCKET=" + notify_path, "WATCHDOG_USEC=400000"},
                    dir + "/log", dir + "/log");
  INFO(ReadFileOrEmpty(dir + "/log"));
  REQUIRE(Receive(fd, 20000).find("READY=1") != std::string::npos);
  auto pings = WatchdogPings(fd, std::chrono::milliseconds(2000));
  CHECK(pings.size() >= 8);
  CHECK(pings.size() <= 12);
  for (size_t i = 1; i < pings.size(); ++i) {
    const auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(pings[i] - pings[i - 1]);
    INFO("gap " << i << ": " << gap.count() << " ms");
    CHECK(gap.count() >= 150);
    CHECK(gap.count() <= 350);
  }
  // A stopped event loop stops pinging (systemd then restarts the daemon).
  REQUIRE(kill(pid, SIGSTOP) == 0);
  Receive(fd, 100);  // one that was on its way
  CHECK(WatchdogPings(fd, std::chrono::milliseconds(1000)).empty());
  REQUIRE(kill(pid, SIGCONT) == 0);
  CHECK_FALSE(WatchdogPings(fd, std::chrono::milliseconds(1000)).empty());
  StopCleanly(pid);
  close(fd);
}

TEST_CASE("a watchdog meant for another process (WATCHDOG_PID) is not pinged") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string notify_path = dir + "/notify.sock";
  int fd = BindNotifySocket(notify_path);
  pid_t pid = Spawn(EmberdCommand(dir),
                    {"NOTIFY_SOCKET=" + notify_path, "WATCHDOG_USEC=200000",
                     "WATCHDOG_PID=" + std::to_string(getpid())},
                    dir + "/log", dir + "/log");
  INFO(ReadFileOrEmpty(dir + "/log"));
  REQUIRE(Receive(fd, 20000).find("READY=1") != std::string::npos);
  CHECK(WatchdogPings(fd, std::chrono::milliseconds(800)).empty());
  StopCleanly(pid);
  close(fd);
}

}  // namespace
}  // namespace ember::testing
