// Things a client can do that used to stop emberd serving everyone (issue 13): FIFOs
// where files should be, and running the daemon out of descriptors. Each case checks
// that the daemon answers another client afterwards, within a deadline.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir_testing.h"
#include "daemon/data/image/image_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using std::chrono::seconds;

// Runs `call` on a thread; fails the test if it has not returned within `deadline`
// (then `unblock` runs, so that the thread can end).
template <typename F>
auto WithinDeadline(F call, seconds deadline, const std::function<void()>& unblock) {
  auto done = std::async(std::launch::async, std::move(call));
  if (done.wait_for(deadline) != std::future_status::ready) {
    unblock();
    done.wait();
    FAIL("the call did not return within " << deadline.count() << " s");
  }
  return done.get();
}

// The daemon still answers a new client (else it is killed, to end the wait).
void CheckAnswers(Daemon& daemon) {
  const bool answered = WithinDeadline(
      [&] {
        auto client = daemon.Connect();
        return client->GetStatus().ok();
      },
      seconds(15), [&] { daemon.Kill(); });
  INFO(daemon.log());
  CHECK(answered);
}

// Opens the FIFO for writing without blocking, so that a reader stuck in open() returns.
void ReleaseFifo(const std::string& fifo) {
  const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) close(fd);
}

TEST_CASE("a FIFO registered as a dataset's file is refused at once, naming it") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 10);
  const std::string dir = daemon.dir() + "/fifo";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(daemon.dir() + "/train-labels-idx1-ubyte.gz",
                             dir + "/train-labels-idx1-ubyte.gz");
  const std::string fifo = dir + "/train-images-idx3-ubyte";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const Status added = WithinDeadline(
      [&] { return daemon.Connect()->AddDataset({"fifo", "idx", dir, "train"}).status(); },
      seconds(15),
      [&] { ReleaseFifo(fifo); });
  INFO(added.ToString());
  CHECK_FALSE(added.ok());
  CHECK_THAT(added.message(), Catch::Contains(fifo + ": not a regular file (a FIFO)"));
  CheckAnswers(daemon);
}

TEST_CASE("a FIFO named x.png inside an imagefolder never blocks the daemon") {
  Daemon daemon;
  daemon.Start();
  const std::string root = daemon.dir() + "/photos";
  std::filesystem::create_directories(root + "/ant");
  for (int i = 0; i < 3; ++i)
    WriteTestFile(root + "/ant/" + std::to_string(i) + ".png",
                  daemon::EncodePng(daemon::GradientImage(32, 32)));
  const std::string fifo = root + "/ant/x.png";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  for (const char* on_error : {"fail", "skip"}) {
    INFO("on_error: " << on_error);
    const std::string name = std::string("photos-") + on_error;
    const Status added = WithinDeadline(
        [&] {
          DatasetSpec spec{name, "imagefolder", root, "train"};
          spec.on_error = on_error;
          return daemon.Connect()->AddDataset(spec).status();
        },
        seconds(15), [&] { ReleaseFifo(fifo); });
    INFO(added.ToString());
    if (!added.ok()) {
      CHECK_THAT(added.message(), Catch::Contains("x.png"));
      continue;
    }
    // Registered: reading its epoch skips or fails on the FIFO, naming it, and ends.
    const std::string outcome = WithinDeadline(
        [&] {
          auto client = daemon.Connect();
          auto reader = client->OpenStream(ReaderOptions(name, 2, 1, name));
          if (!reader.ok()) return reader.status().ToString();
          size_t batches = 0;
          for (;;) {
            auto next = (*reader)->Next();
            if (!next.ok()) return next.status().ToString();
            if (!next->has_value()) return "read " + std::to_string(batches) + " batches";
            ++batches;
          }
        },
        seconds(30), [&] { ReleaseFifo(fifo); });
    INFO(outcome);
    if (std::string(on_error) == "fail")
      CHECK_THAT(outcome, Catch::Contains("x.png"));
    else
      CHECK(outcome == "read 2 batches");  // 3 images of 4 files, batch 2
  }
  CheckAnswers(daemon);
}

TEST_CASE("running out of descriptors pauses accepting; it resumes when they are back") {
  // emberd with room for little more than its own descriptors.
  TempDir dir;
  Daemon daemon(dir.path(), {}, {"/usr/bin/prlimit", "--nofile=48:48"});
  daemon.Start();
  const int base = CountFds(daemon.pid());
  INFO("emberd holds " << base << " descriptors at start");
  REQUIRE(base < 40);
  // Plain connections until accept() runs out of descriptors (and a few more queued).
  std::vector<int> held;
  for (int i = 0; i < 64; ++i) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, daemon.socket().c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      break;  // the backlog is full
    }
    held.push_back(fd);
  }
  // Give the daemon time to hit EMFILE.
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (daemon.log().find("accepting connections failed") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_THAT(daemon.log(), Catch::Contains("accepting connections failed, retrying in 1 s"));
  for (int fd : held) close(fd);
  CheckAnswers(daemon);
}

TEST_CASE("a job whose other ranks never join expires, and its rank's stream says why") {
  TempDir dir;
  Daemon daemon(dir.path(), WriteDaemonConfig(dir.path(), "job_fill_timeout: 1\n"));
  auto client = StartWithSyntheticDataset(daemon, 2000);
  StreamOptions options = ReaderOptions("half", 1, 0);  // epochs 0: read on and on
  options.world_size = 2;
  auto reader = client->OpenStream(options);
  REQUIRE(reader.ok());
  const std::string outcome = WithinDeadline(
      [&] {
        for (;;) {
          auto next = (*reader)->Next();
          if (!next.ok()) return next.status().ToString();
          if (!next->has_value()) return std::string("the stream ended");
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      },
      seconds(30), [&] { daemon.Kill(); });
  INFO(daemon.log());
  CHECK_THAT(outcome, Catch::Contains("job 'half' expired: rank 1 of 2 did not join within 1 s"));
  CHECK_THAT(daemon.log(), Catch::Contains("job 'half' expired"));
  CheckAnswers(daemon);
}

TEST_CASE("a folder of bad files under on_error: skip does not flood the log") {
  Daemon daemon;
  daemon.Start();
  const std::string root = daemon.dir() + "/junk";
  std::filesystem::create_directories(root + "/ant");
  for (int i = 0; i < 400; ++i)
    WriteTestFile(root + "/ant/bad" + std::to_string(i) + ".png", "\x89PNG garbage");
  WriteTestFile(root + "/ant/good.png", daemon::EncodePng(daemon::GradientImage(32, 32)));
  auto client = daemon.Connect();
  DatasetSpec spec{"junk", "imagefolder", root, "train"};
  spec.on_error = "skip";
  REQUIRE(client->AddDataset(spec).ok());
  const auto start = std::chrono::steady_clock::now();
  auto reader = client->OpenStream(ReaderOptions("junk", 401, 1, "junk"));
  REQUIRE(reader.ok());
  size_t samples = 0;
  for (;;) {
    auto next = (*reader)->Next();
    REQUIRE(next.ok());
    if (!next->has_value()) break;
    samples += (**next).num_samples;
  }
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(samples == 1);
  // The last line, with the count held back, comes as the stream ends; the log is flushed
  // a moment later.
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (daemon.log().find("more samples skipped") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string log = daemon.log();
  size_t lines = 0;
  for (size_t at = log.find("): skipped "); at != std::string::npos;
       at = log.find("): skipped ", at + 1))
    ++lines;
  INFO(lines << " skip lines in " << elapsed_s << " s");
  CHECK(lines <= 10 * (static_cast<size_t>(elapsed_s) + 2));
  CHECK_THAT(log, Catch::Contains("more samples skipped, not logged one by one"));
}

TEST_CASE("a job name of a megabyte is refused, for a stream and for the store") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 10);
  const std::string huge(1 << 20, 'j');
  auto reader = client->OpenStream(ReaderOptions(huge, 2, 1));
  REQUIRE_FALSE(reader.ok());
  CHECK_THAT(reader.status().message(), Catch::Contains("job: a name of 1048576 bytes"));
  const Status set = client->KvSet(huge, "k", "v");
  CHECK(set.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(set.message(), Catch::Contains("job: a name of 1048576 bytes"));
  CheckAnswers(daemon);
}

}  // namespace
}  // namespace ember::testing
