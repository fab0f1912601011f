// emberd tells systemd it is ready (Type=notify): with NOTIFY_SOCKET set, it sends
// READY=1 once it serves on its socket, and STOPPING=1 on SIGTERM.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>

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

TEST_CASE("emberd sends READY=1 when it serves and STOPPING=1 when it stops") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string notify_path = dir + "/notify.sock";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify_path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);

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

}  // namespace
}  // namespace ember::testing
