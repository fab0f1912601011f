// emberd's command line: flags override the config file key by key, the file's other keys
// still apply, no file at all gives the defaults, and a bad flag value stops it with the
// flag's name.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <thread>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

// Runs emberd with `args` until its log says it serves (or it exits), then stops it with
// SIGTERM; returns its log. Fails the test if it does not serve within 20 s.
std::string ServeOnce(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), Runfile("daemon/emberd"));
  const std::string log_path = dir + "/once.log";
  const pid_t pid = Spawn(args, {}, log_path, log_path);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ReadFileOrEmpty(log_path).find("serving on") == std::string::npos) {
    if (WaitFor(pid, std::chrono::milliseconds(0)) != -1 ||
        std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      WaitFor(pid, std::chrono::seconds(10));
      FAIL("emberd did not serve; its log:\n" << ReadFileOrEmpty(log_path));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGTERM);
  const int status = WaitFor(pid, std::chrono::seconds(15));
  CHECK((status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0));
  return ReadFileOrEmpty(log_path);
}

TEST_CASE("emberd's flags override the keys of its config file") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  Daemon daemon(dir, WriteDaemonConfig(dir, "socket: " + dir + "/file.sock\n"
                                            "state_dir: " + dir + "/file-state\n"
                                            "shm_budget: 1GiB\n"
                                            "ring_slots: 16\n"
                                            "log_level: error\n"));
  auto client = StartWithSyntheticDataset(daemon, 64);
  auto reader = client->OpenStream(ReaderOptions("j", 8, 1));
  REQUIRE(reader.ok());
  auto status = client->GetStatus();
  REQUIRE(status.ok());
  CHECK(status->shm_bytes_budget == 256ull << 20);
  REQUIRE(status->streams.size() == 1);
  CHECK(status->streams[0].slot_count == 4);
  struct stat st;
  CHECK(stat((dir + "/file.sock").c_str(), &st) != 0);
  CHECK(stat((dir + "/file-state").c_str(), &st) != 0);
  CHECK(stat((dir + "/state/catalog.yaml").c_str(), &st) == 0);
  CHECK(daemon.log().find("serving on " + daemon.socket()) != std::string::npos);
  reader->reset();
  daemon.Stop();
}

TEST_CASE("emberd reads the keys that no flag overrides from its config file") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::vector<std::string> config =
      WriteDaemonConfig(dir, "decode_threads: 3\nshm_budget: 64MiB\n");
  const std::string log = ServeOnce(dir, {config[0], config[1], "--socket", dir + "/emberd.sock",
                                          "--state-dir", dir + "/state"});
  CHECK(log.find("serving on " + dir + "/emberd.sock (state " + dir +
                 "/state, 3 decode threads, shm budget 67108864 bytes") != std::string::npos);
}

TEST_CASE("emberd runs without a config file on the defaults and its flags") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string log = ServeOnce(dir, {"--socket", dir + "/emberd.sock", "--state-dir",
                                          dir + "/state", "--decode-threads", "1"});
  CHECK(log.find("1 decode threads, shm budget 4294967296 bytes") != std::string::npos);
}

TEST_CASE("emberd refuses a bad flag value, naming the flag") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--ring-slots", "1"}, {"--shm-budget", "0"}, {"--shm-budget", "lots"},
           {"--log-level", "loud"}, {"--decode-threads", "-2"}}) {
    std::vector<std::string> args = EmberdCommand(dir);
    args.resize(3);  // emberd --socket --state-dir
    args.insert(args.end(), bad.begin(), bad.end());
    const std::string err = dir + "/bad.err";
    const int status = WaitFor(Spawn(args, {}, "", err), std::chrono::seconds(20));
    INFO(bad[0] << " " << bad[1]);
    CHECK((status != -1 && WIFEXITED(status) && WEXITSTATUS(status) != 0));
    CHECK(ReadFileOrEmpty(err).find(bad[0]) != std::string::npos);
    struct stat st;
    CHECK(stat((dir + "/emberd.sock").c_str(), &st) != 0);
    unlink(err.c_str());
  }
}

}  // namespace
}  // namespace ember::testing
