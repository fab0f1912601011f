// A daemon on demand (sdk/src/private_daemon.h): a client that finds no emberd starts the
// user's private one, processes started at once share one, it stops by itself once idle,
// EMBER_AUTOSTART=0 turns it off, and one that cannot start says why.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>
#include <string>
#include <thread>

#include "ember/client.h"
#include "tests/support/process_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// This process's environment as a user with no daemon running: XDG_RUNTIME_DIR and
// XDG_CACHE_HOME in a fresh directory under /tmp (a socket path must stay short),
// EMBER_SOCKET unset, EMBER_EMBERD the built emberd, EMBER_IDLE_EXIT 2 s. Restored after.
class NoDaemonYet {
 public:
  NoDaemonYet() {
    for (const char* name : {"XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "EMBER_SOCKET",
                             "EMBER_EMBERD", "EMBER_IDLE_EXIT", "EMBER_AUTOSTART"}) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
    }
    setenv("XDG_RUNTIME_DIR", (dir_.path() + "/run").c_str(), 1);
    mkdir((dir_.path() + "/run").c_str(), 0700);
    setenv("XDG_CACHE_HOME", (dir_.path() + "/cache").c_str(), 1);
    unsetenv("EMBER_SOCKET");
    unsetenv("EMBER_AUTOSTART");
    setenv("EMBER_EMBERD", Runfile("daemon/emberd").c_str(), 1);
    setenv("EMBER_IDLE_EXIT", "2", 1);
  }
  ~NoDaemonYet() {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  std::string socket() const { return dir_.path() + "/run/ember/emberd.sock"; }
  std::string log() const { return dir_.path() + "/run/ember/emberd.log"; }
  std::string dir() const { return dir_.path(); }

 private:
  TempDir dir_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Whether `pid` is gone (or a zombie: the daemon is nobody's child here).
bool Gone(pid_t pid) {
  const std::string stat = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

TEST_CASE("with no daemon, two ranks at once start one private emberd; it stops when idle") {
  NoDaemonYet env;
  // Two processes (forked before any client exists here) connect at the same moment.
  int pipes[2][2];
  pid_t ranks[2];
  for (int r = 0; r < 2; ++r) {
    REQUIRE(pipe(pipes[r]) == 0);
    ranks[r] = fork();
    REQUIRE(ranks[r] >= 0);
    if (ranks[r] == 0) {
      auto client = Client::Connect();
      uint32_t pid = 0;
      if (client.ok()) {
        auto status = (*client)->GetStatus();
        if (status.ok()) pid = status->pid;
      } else {
        std::fprintf(stderr, "rank %d: %s\n", r, client.status().ToString().c_str());
      }
      (void)!write(pipes[r][1], &pid, sizeof(pid));
      std::this_thread::sleep_for(milliseconds(500));  // connected a while
      _exit(0);
    }
    close(pipes[r][1]);
  }
  uint32_t daemon[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    REQUIRE(read(pipes[r][0], &daemon[r], sizeof(daemon[r])) == sizeof(daemon[r]));
    close(pipes[r][0]);
    CHECK(WaitFor(ranks[r], seconds(30)) == 0);
  }
  INFO(ReadFileOrEmpty(env.log()));
  REQUIRE(daemon[0] != 0);
  CHECK(daemon[0] == daemon[1]);  // one private daemon for both
  struct stat st;
  REQUIRE(stat(env.socket().c_str(), &st) == 0);
  CHECK((st.st_mode & S_IFMT) == S_IFSOCK);
  CHECK(stat((env.dir() + "/cache/ember").c_str(), &st) == 0);  // its state dir
  // Its last client gone, it stops within its idle time (2 s) and a check's second.
  const auto deadline = std::chrono::steady_clock::now() + seconds(15);
  while (!Gone(daemon[0]) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(100));
  CHECK(Gone(daemon[0]));
  CHECK(stat(env.socket().c_str(), &st) != 0);  // its socket removed
  const std::string log = ReadFileOrEmpty(env.log());
  CHECK(log.find("no client for 2 s (idle_exit), shutting down") != std::string::npos);
  CHECK(log.find("emberd stopped") != std::string::npos);
  // A later client starts it again.
  auto again = Client::Connect();
  REQUIRE(again.ok());
  auto status = (*again)->GetStatus();
  REQUIRE(status.ok());
  CHECK(status->pid != daemon[0]);
  const pid_t second = static_cast<pid_t>(status->pid);
  again->reset();
  const auto stop_deadline = std::chrono::steady_clock::now() + seconds(15);
  while (!Gone(second) && std::chrono::steady_clock::now() < stop_deadline)
    std::this_thread::sleep_for(milliseconds(100));
  CHECK(Gone(second));
}

TEST_CASE("EMBER_AUTOSTART=0 starts no daemon and says what to do") {
  NoDaemonYet env;
  setenv("EMBER_AUTOSTART", "0", 1);
  auto client = Client::Connect();
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(client.status().message(), Catch::Contains("is emberd running?"));
  struct stat st;
  CHECK(stat(env.socket().c_str(), &st) != 0);
}

TEST_CASE("a private emberd that cannot start is named with its log's last line") {
  NoDaemonYet env;
  const std::string fake = env.dir() + "/broken-emberd";
  std::ofstream(fake) << "#!/bin/sh\necho 'emberd: state_dir: permission denied'\nexit 2\n";
  chmod(fake.c_str(), 0755);
  setenv("EMBER_EMBERD", fake.c_str(), 1);
  auto client = Client::Connect();
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(client.status().message(),
             Catch::Contains("exited before serving on " + env.socket()) &&
                 Catch::Contains("emberd: state_dir: permission denied") &&
                 Catch::Contains("EMBER_AUTOSTART=0"));
}

}  // namespace
}  // namespace ember::testing
