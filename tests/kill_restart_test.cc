// Kill/restart cycles (issue 13): trainers SIGKILLed while they stream from one emberd,
// and emberd SIGKILLed under a streaming trainer and started again, leave nothing behind:
// emberd's descriptors, memfds and RSS, /dev/shm and the state directory stay flat.
// EMBER_KILL_CYCLES sets the number of cycles of each kind (default 10; 100 by hand:
//   bazel test //tests:kill_restart_test --test_env=EMBER_KILL_CYCLES=100 --test_output=all).
#include <signal.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

int Cycles() {
  const char* text = std::getenv("EMBER_KILL_CYCLES");
  return text == nullptr ? 10 : std::max(2, std::atoi(text));
}

// What might leak, for one emberd at rest (no trainer attached).
struct Footprint {
  int fds = 0;
  int memfds = 0;
  long rss_kib = 0;
  int dev_shm = 0;
  int state_files = 0;
};

Footprint Measure(const Daemon& daemon) {
  return {CountFds(daemon.pid()), CountMemfds(daemon.pid()), RssKib(daemon.pid()),
          CountEntries("/dev/shm"), CountEntries(daemon.dir() + "/state")};
}

// Starts a trainer stand-in holding 2 batches of `job` and waits until it holds them.
pid_t StartTrainer(const Daemon& daemon, const std::string& job) {
  const std::string out = daemon.dir() + "/" + job + ".out";
  pid_t pid = Spawn({Runfile("tests/stream_reader_main"), daemon.socket(), "syn", job, "2"}, {},
                    out, daemon.dir() + "/trainers.err");
  const bool ready = Eventually(
      [&] { return ReadFileOrEmpty(out).find("ready") != std::string::npos; },
      std::chrono::seconds(20));
  INFO(ReadFileOrEmpty(daemon.dir() + "/trainers.err") << daemon.log());
  REQUIRE(ready);
  return pid;
}

void KillTrainer(pid_t pid) {
  kill(pid, SIGKILL);
  REQUIRE(WaitFor(pid, std::chrono::seconds(10)) != -1);
}

// Waits until the daemon has let go of every ring: back to `baseline` memfds.
void WaitReleased(const Daemon& daemon, int baseline_memfds) {
  CHECK(Eventually([&] { return CountMemfds(daemon.pid()) <= baseline_memfds; }));
}

void Report(const char* what, int cycles, const Footprint& first, const Footprint& last) {
  std::printf("%s, %d cycles: fds %d -> %d, memfds %d -> %d, RSS %ld -> %ld KiB, /dev/shm %d -> "
              "%d, state files %d -> %d\n",
              what, cycles, first.fds, last.fds, first.memfds, last.memfds, first.rss_kib,
              last.rss_kib, first.dev_shm, last.dev_shm, first.state_files, last.state_files);
  std::fflush(stdout);
  CHECK(last.fds <= first.fds);
  CHECK(last.memfds <= first.memfds);
  CHECK(last.dev_shm <= first.dev_shm);
  CHECK(last.state_files <= first.state_files);
  // Allocator noise only: a leaked ring (53 KiB) or job per cycle would show.
  CHECK(last.rss_kib - first.rss_kib < 1024);
}

// Runs `cycle(daemon, i)` Cycles() times on a daemon serving dataset "syn", measuring it
// at rest halfway (the first half warms up what stays: the dataset's source, allocator
// arenas of the decode threads) and at the end, and checks the second half did not grow.
void RunCycles(const char* what, const std::function<void(Daemon&, int)>& cycle) {
  Daemon daemon;
  StartWithSyntheticDataset(daemon, 4000).reset();
  const int baseline_memfds = CountMemfds(daemon.pid());
  const int cycles = Cycles();
  Footprint first;
  for (int i = 0; i < cycles; ++i) {
    cycle(daemon, i);
    WaitReleased(daemon, baseline_memfds);
    if (i == cycles / 2 - 1) first = Measure(daemon);
  }
  Report(what, cycles, first, Measure(daemon));
  auto client = daemon.Connect();
  auto datasets = client->ListDatasets();
  REQUIRE(datasets.ok());
  CHECK(datasets->size() == 1);
  client.reset();
  daemon.Stop();
}

TEST_CASE("trainers killed while streaming leave emberd as it was") {
  RunCycles("trainer kills", [](Daemon& daemon, int i) {
    KillTrainer(StartTrainer(daemon, "t" + std::to_string(i)));
  });
}

TEST_CASE("emberd killed under a streaming trainer starts again leaving nothing behind") {
  RunCycles("emberd kills", [](Daemon& daemon, int i) {
    pid_t trainer = StartTrainer(daemon, "d" + std::to_string(i));
    daemon.Kill();
    daemon.Start();  // the stale socket is removed, the journal replayed
    KillTrainer(trainer);
    // A stream on the new daemon, so each cycle exercises the restarted one too.
    KillTrainer(StartTrainer(daemon, "d" + std::to_string(i) + "-after"));
  });
}

}  // namespace
}  // namespace ember::testing
