// Runs data_parallel_test_worker as separate processes (one per rank) and reads their exit
// codes and stderr; the workers check their own training (see data_parallel_test_worker.cc).
// This test does not link LibTorch: it only spawns and waits.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "sdk/sync/worker_testing.h"
#include "tests/support/process_testing.h"

namespace ember::sdk::testing {
namespace {

// With 300-byte buckets the test network's parameters fall into four buckets
// (three float32 ones and the float64 `scale`).
const std::vector<std::string> kSmallBuckets = {"--bucket-bytes", "300", "--min-buckets", "4"};

std::string WorkerBinary() { return ember::testing::Runfile("sdk/sync/data_parallel_test_worker"); }

Worker Spawn(const std::string& store, int rank, int world, const std::vector<std::string>& extra) {
  return SpawnWorker(WorkerBinary(), store, rank, world, extra);
}

void TrainAndExpectSuccess(const std::string& name, int world, std::vector<std::string> extra) {
  const std::string store = FreshTempPath(name + ".store");
  extra.insert(extra.end(), {"--steps", "20", "--timeout-ms", "30000"});
  const Clock::time_point start = Clock::now();
  ExpectAllSucceed(SpawnWorkers(WorkerBinary(), store, world, extra), start,
                   std::chrono::seconds(60), "ok after 20 steps");
}

std::vector<std::string> With(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

TEST_CASE("two ranks with several buckets match single-process training") {
  TrainAndExpectSuccess("train2", 2, kSmallBuckets);
}

TEST_CASE("three ranks with several buckets match single-process training") {
  TrainAndExpectSuccess("train3", 3, kSmallBuckets);
}

TEST_CASE("the default bucket size gives one bucket per dtype and the same result") {
  TrainAndExpectSuccess("default_buckets", 2, {"--min-buckets", "2", "--max-buckets", "2"});
}

TEST_CASE("a small first bucket splits off the last layers' gradients, same result") {
  // float32: extra's and head's gradients reach 100 bytes, the rest follow; float64: scale.
  TrainAndExpectSuccess("first_bucket", 2, {"--first-bucket-bytes", "100", "--min-buckets", "3",
                                            "--max-buckets", "3"});
}

TEST_CASE("accumulating two micro-batches under NoSync equals one big batch") {
  TrainAndExpectSuccess("accumulate2", 2, With(kSmallBuckets, {"--micro-batches", "2"}));
  TrainAndExpectSuccess("accumulate3", 3, With(kSmallBuckets, {"--micro-batches", "2"}));
}

TEST_CASE("a parameter that only one rank uses gets the average over all ranks") {
  TrainAndExpectSuccess("unused_one", 3, With(kSmallBuckets, {"--unused", "one-rank"}));
}

TEST_CASE("a parameter that no rank uses keeps an undefined gradient") {
  TrainAndExpectSuccess("unused_all", 2,
                        With(kSmallBuckets, {"--unused", "all-ranks", "--micro-batches", "2"}));
}

// DataParallel queues its buckets on the shared-memory communicator; they run, in order,
// when backward ends.
TEST_CASE("shared memory: buckets, micro-batches and unused parameters as over Gloo") {
  const std::vector<std::string> shm = With(kSmallBuckets, {"--backend", "shm"});
  TrainAndExpectSuccess("shm2", 2, shm);
  TrainAndExpectSuccess("shm3", 3, With(shm, {"--micro-batches", "2", "--unused", "one-rank"}));
}

// Kills rank 1 of 2 after step 3 and returns rank 0's outcome, timed from the death, and
// rank 1's pid.
std::pair<Outcome, pid_t> SurvivorOfKilledPeer(const std::string& name,
                                               const std::vector<std::string>& extra) {
  auto survivor =
      testing::SurvivorOfKilledPeer(WorkerBinary(), FreshTempPath(name + ".store"), extra,
                                    std::chrono::seconds(30), std::chrono::seconds(15));
  INFO("rank 0 stderr:\n" << survivor.first.err);
  CHECK(survivor.first.err.find(
            "rank 0: DataParallel (rank 0 of 2): all-reduce of gradient bucket") !=
        std::string::npos);
  return survivor;
}

TEST_CASE("shared memory: a peer killed mid-training makes the survivor fail at once") {
  // A long timeout: the survivor must notice the death itself.
  auto [outcome, victim] = SurvivorOfKilledPeer(
      "killed_shm", With(kSmallBuckets, {"--backend", "shm", "--timeout-ms", "60000"}));
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.err.find("rank 1 (pid " + std::to_string(victim) +
                         ") exited before reaching the collective") != std::string::npos);
  CHECK(outcome.seconds < 6);
}

TEST_CASE("a peer killed mid-training makes the survivor fail, not hang") {
  Outcome outcome =
      SurvivorOfKilledPeer("killed", With(kSmallBuckets, {"--timeout-ms", "3000"})).first;
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.err.find("gloo all-reduce") != std::string::npos);
  CHECK(outcome.seconds < 6);
}

TEST_CASE("a peer that stops taking part makes the others time out in backward") {
  const std::string store = FreshTempPath("stalled.store");
  const Clock::time_point start = Clock::now();
  std::vector<Worker> workers;
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<std::string> extra = With(kSmallBuckets, {"--timeout-ms", "3000"});
    if (rank == 2) extra.insert(extra.end(), {"--stall-after-step", "2"});
    workers.push_back(Spawn(store, rank, 3, extra));
  }
  for (int rank = 0; rank < 2; ++rank) {
    Outcome outcome = Wait(workers[rank], start, std::chrono::seconds(20));
    INFO("rank " << rank << " stderr:\n" << outcome.err);
    CHECK(outcome.exited);
    CHECK(outcome.exit_code == 2);
    const std::string who = "rank " + std::to_string(rank) + " of 3";
    CHECK(outcome.err.find("DataParallel (" + who + "): all-reduce of gradient bucket") !=
          std::string::npos);
    CHECK(outcome.err.find("gloo all-reduce (group 'data_parallel_test', " + who + ") failed") !=
          std::string::npos);
    CHECK(outcome.seconds < 15);
  }
  Outcome stalled = Wait(workers[2], start, std::chrono::seconds(0));
  INFO("rank 2 stderr:\n" << stalled.err);
  CHECK(!stalled.exited);  // still asleep, killed by Wait
  CHECK(stalled.err.find("stalling after step 2") != std::string::npos);
}

TEST_CASE("a peer that never constructs DataParallel fails the others' constructor") {
  const std::string store = FreshTempPath("absent.store");
  const Clock::time_point start = Clock::now();
  Worker present = Spawn(store, 0, 2, {"--timeout-ms", "2000"});
  Worker absent = Spawn(store, 1, 2, {"--timeout-ms", "2000", "--stall-after-step", "0"});
  Outcome outcome = Wait(present, start, std::chrono::seconds(20));
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.exited);
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.err.find("gloo broadcast (group 'data_parallel_test', rank 0 of 2)") !=
        std::string::npos);
  Outcome stalled = Wait(absent, start, std::chrono::seconds(0));
  CHECK(!stalled.exited);
}

}  // namespace
}  // namespace ember::sdk::testing
