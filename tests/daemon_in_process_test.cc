// The Daemon started in-process (daemon/server/daemon.h), as tf.data service's tests start
// their servers: a real unix socket, real rings and the SDK client, no subprocess. Checks
// the order of start-up and shutdown that users rely on.
#include "daemon/server/daemon.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/env.h"
#include "common/env_wrapper.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/image/image_testing.h"
#include "ember/client.h"
#include "tests/support/test_env.h"

namespace ember {
namespace {

using daemon::Daemon;
using daemon::DaemonConfig;
using std::chrono::milliseconds;
using testing::Eventually;
using testing::ReaderOptions;
using testing::TempDir;

// An Env whose ReadFile and OpenForRead of the paths `held` picks wait, once armed, until
// Release(): a disk that stalls, so that a test sees what the daemon does meanwhile.
class HoldingEnv final : public EnvWrapper {
 public:
  explicit HoldingEnv(Env* target) : EnvWrapper(target) {}

  void Hold(std::function<bool(const std::string&)> held) {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = std::move(held);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = nullptr;
    changed_.notify_all();
  }
  // Waits up to `timeout` until a call is held; true if one is.
  bool WaitUntilHeld(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return waiting_ > 0; });
  }

  Result<std::string> ReadFile(const std::string& path) override {
    Wait(path);
    return target()->ReadFile(path);
  }
  Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    Wait(path);
    return target()->OpenForRead(path);
  }

 private:
  // At most 20 s, so that a daemon that wrongly waits fails the test instead of hanging it.
  void Wait(const std::string& path) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!held_ || !held_(path)) return;
    ++waiting_;
    changed_.notify_all();
    changed_.wait_for(lock, std::chrono::seconds(20), [&] { return !held_; });
    --waiting_;
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::function<bool(const std::string&)> held_;  // guarded by mu_
  int waiting_ = 0;                               // guarded by mu_
};

DaemonConfig ConfigIn(const std::string& dir) {
  DaemonConfig config;
  config.socket_path = dir + "/emberd.sock";
  config.state_dir = dir + "/state";
  config.decode_threads = 2;
  config.shm_budget_bytes = 64ull << 20;
  config.default_slots = 4;
  config.log_level = "warn";
  return config;
}

// Whether a client can connect to the unix socket `path` now.
bool Accepts(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return connected;
}

std::unique_ptr<Client> ConnectTo(const Daemon& daemon) {
  ClientOptions options;
  options.socket_path = daemon.socket_path();
  options.call_timeout = milliseconds(20000);
  auto client = Client::Connect(options);
  INFO(client.status().ToString());
  REQUIRE(client.ok());
  return std::move(client).value();
}

TEST_CASE("a Daemon serves in-process and stops as asked, removing its socket") {
  TempDir tmp;
  testing::WriteSyntheticIdx(tmp.path(), "train", 64);
  std::unique_ptr<Env> env = NewPosixEnv();
  auto daemon = Daemon::Start(env.get(), ConfigIn(tmp.path()));
  INFO(daemon.status().ToString());
  REQUIRE(daemon.ok());
  {
    auto client = ConnectTo(**daemon);
    REQUIRE(client->AddDataset({"syn", "idx", tmp.path(), "train"}).ok());
    auto reader = client->OpenStream(ReaderOptions("j", 16, 1, "syn"));
    REQUIRE(reader.ok());
    uint64_t samples = 0;
    for (;;) {
      auto next = (*reader)->Next();
      REQUIRE(next.ok());
      if (!next->has_value()) break;
      samples += (*next)->num_samples;
    }
    CHECK(samples == 64);
  }
  CHECK((*daemon)->Wait(milliseconds(0)).code() == StatusCode::kDeadlineExceeded);
  (*daemon)->Stop("the test is done");
  CHECK((*daemon)->Wait(milliseconds(20000)).ok());
  CHECK_FALSE(std::filesystem::exists(tmp.path() + "/emberd.sock"));
}

// The permission bits of `path`.
mode_t ModeOf(const std::string& path) {
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

TEST_CASE("the state directory and its files are emberd's alone whatever the umask") {
  TempDir tmp;
  testing::WriteSyntheticIdx(tmp.path(), "train", 32);
  // What an older emberd left under root's umask 022.
  const std::string state = tmp.path() + "/state";
  std::filesystem::create_directories(state);
  ::chmod(state.c_str(), 0755);
  WriteTestFile(state + "/jobs.journal.prev-run", "old");
  ::chmod((state + "/jobs.journal.prev-run").c_str(), 0644);
  const mode_t old_umask = ::umask(022);
  std::unique_ptr<Env> env = NewPosixEnv();
  DaemonConfig config = ConfigIn(tmp.path());
  config.listen = "127.0.0.1:0";  // peer.port too
  config.tls = daemon::PeerTlsMode::kOff;
  auto daemon = Daemon::Start(env.get(), config);
  INFO(daemon.status().ToString());
  REQUIRE(daemon.ok());
  {
    auto client = ConnectTo(**daemon);
    REQUIRE(client->AddDataset({"a", "idx", tmp.path(), "train"}).ok());
    REQUIRE(client->AddDataset({"b", "idx", tmp.path(), "train"}).ok());  // keeps a .prev
    auto reader = client->OpenStream(ReaderOptions("j", 16, 1, "a"));
    REQUIRE(reader.ok());
    REQUIRE((*reader)->Next().ok());
  }
  CHECK(ModeOf(state) == 0700);
  for (const char* name : {"catalog.yaml", "catalog.yaml.prev", "jobs.journal", "peer.port",
                           "jobs.journal.prev-run"}) {
    INFO(name);
    CHECK(ModeOf(state + "/" + name) == 0600);
  }
  (*daemon)->Stop("the test is done");
  CHECK((*daemon)->Wait(milliseconds(20000)).ok());
  ::umask(old_umask);
}

TEST_CASE("Daemon::Start fails with the step's error and leaves nothing serving") {
  TempDir tmp;
  std::unique_ptr<Env> env = NewPosixEnv();
  DaemonConfig config = ConfigIn(tmp.path());
  config.plugin_paths = {tmp.path() + "/missing.so"};
  auto daemon = Daemon::Start(env.get(), config, "/etc/ember/test.yaml");
  REQUIRE_FALSE(daemon.ok());
  CHECK_THAT(daemon.status().message(), Catch::StartsWith("/etc/ember/test.yaml: "));
  CHECK_THAT(daemon.status().message(), Catch::Contains("missing.so"));

  // A damaged journal stops the start before the socket exists.
  std::filesystem::create_directories(tmp.path() + "/state");
  WriteTestFile(tmp.path() + "/state/jobs.journal", std::string(64, '\x5a'));
  daemon = Daemon::Start(env.get(), ConfigIn(tmp.path()));
  REQUIRE_FALSE(daemon.ok());
  CHECK_THAT(daemon.status().message(), Catch::Contains("jobs.journal"));
  CHECK_FALSE(std::filesystem::exists(tmp.path() + "/emberd.sock"));

  // Another daemon on the socket.
  std::filesystem::remove(tmp.path() + "/state/jobs.journal");
  auto first = Daemon::Start(env.get(), ConfigIn(tmp.path()));
  REQUIRE(first.ok());
  auto second = Daemon::Start(env.get(), ConfigIn(tmp.path()));
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().message() ==
        "another emberd is already serving on " + tmp.path() + "/emberd.sock");
  CHECK(Accepts(tmp.path() + "/emberd.sock"));
}

TEST_CASE("the socket accepts only once the job journal is replayed") {
  TempDir tmp;
  testing::WriteSyntheticIdx(tmp.path(), "train", 64);
  std::unique_ptr<Env> posix = NewPosixEnv();
  {
    auto daemon = Daemon::Start(posix.get(), ConfigIn(tmp.path()));
    REQUIRE(daemon.ok());
    auto client = ConnectTo(**daemon);
    REQUIRE(client->AddDataset({"syn", "idx", tmp.path(), "train"}).ok());
    auto reader = client->OpenStream(ReaderOptions("j", 8, 1, "syn"));
    REQUIRE(reader.ok());
    for (int i = 0; i < 3; ++i) REQUIRE((*reader)->Next().ok());
  }  // the journal holds the job's records (its commits, then its end)

  HoldingEnv env(posix.get());
  const std::string journal = tmp.path() + "/state/jobs.journal";
  env.Hold([journal](const std::string& path) { return path == journal; });
  Result<std::unique_ptr<Daemon>> daemon = Internal("not started");
  std::atomic<bool> returned{false};
  std::thread starting([&] {
    daemon = Daemon::Start(&env, ConfigIn(tmp.path()));
    returned.store(true);
  });
  REQUIRE(env.WaitUntilHeld(milliseconds(10000)));
  // Replaying: Start has not returned and nothing accepts.
  std::this_thread::sleep_for(milliseconds(100));
  CHECK_FALSE(returned.load());
  CHECK_FALSE(Accepts(tmp.path() + "/emberd.sock"));
  env.Release();
  starting.join();
  REQUIRE(daemon.ok());
  CHECK(Accepts(tmp.path() + "/emberd.sock"));
  auto status = ConnectTo(**daemon)->GetStatus();
  REQUIRE(status.ok());
  CHECK(status->datasets.size() == 1);
}

TEST_CASE("Stop refuses new connections, drains the batch being written, then closes") {
  TempDir tmp;
  const std::string root = tmp.path() + "/photos";
  std::filesystem::create_directories(root + "/ant");
  for (int i = 0; i < 8; ++i)
    WriteTestFile(root + "/ant/" + std::to_string(i) + ".jpg",
                           daemon::EncodeJpeg(daemon::GradientImage(40, 36)));
  std::unique_ptr<Env> posix = NewPosixEnv();
  HoldingEnv env(posix.get());
  auto daemon = Daemon::Start(&env, ConfigIn(tmp.path()));
  REQUIRE(daemon.ok());
  auto client = ConnectTo(**daemon);
  DatasetSpec spec{"photos", "imagefolder", root, "train"};
  spec.pipeline = "steps:\n  - resize: {size: 36}\n  - center_crop: {size: 32}\n";
  REQUIRE(client->AddDataset(spec).ok());

  // Every image read stalls: the stream's first batch is in flight.
  env.Hold([](const std::string& path) { return path.size() > 4 && path.substr(path.size() - 4) == ".jpg"; });
  StreamOptions options = ReaderOptions("j", 4, 1, "photos");
  options.shuffle = false;
  auto reader = client->OpenStream(options);
  REQUIRE(reader.ok());
  REQUIRE(env.WaitUntilHeld(milliseconds(10000)));

  (*daemon)->Stop("the test stops it");
  // No new connections at once; the daemon waits for the batch (drain_timeout 10 s).
  CHECK(Eventually([&] { return !Accepts(tmp.path() + "/emberd.sock"); }, milliseconds(5000)));
  std::this_thread::sleep_for(milliseconds(200));
  CHECK((*daemon)->Wait(milliseconds(0)).code() == StatusCode::kDeadlineExceeded);

  // The batch in flight is finished and published before the stream closes.
  env.Release();
  auto first = (*reader)->Next();
  INFO(first.status().ToString());
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  CHECK((*first)->num_samples == 4);
  CHECK((*daemon)->Wait(milliseconds(20000)).ok());
}

}  // namespace
}  // namespace ember
