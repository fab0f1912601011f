// Runs model_sync_test_worker as separate processes (one per rank) and reads their exit codes
// and stderr. This test does not link LibTorch: it only spawns and waits.
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

std::string WorkerBinary() { return ember::testing::Runfile("sdk/sync/model_sync_test_worker"); }

void TrainAndExpectSuccess(int world, const std::string& backend = "gloo") {
  const std::string store =
      FreshTempPath("train" + std::to_string(world) + "_" + backend + ".store");
  const Clock::time_point start = Clock::now();
  ExpectAllSucceed(SpawnWorkers(WorkerBinary(), store, world,
                                {"--steps", "10", "--timeout-ms", "30000", "--backend", backend}),
                   start, std::chrono::seconds(90), "ok after 10 steps");
}

// Rank 0's outcome after rank 1 killed itself after step 3, and rank 1's pid.
std::pair<Outcome, pid_t> SurvivorOfKilledPeer(const std::string& store,
                                               const std::vector<std::string>& extra) {
  return testing::SurvivorOfKilledPeer(WorkerBinary(), store, extra, std::chrono::seconds(60),
                                       std::chrono::seconds(20));
}

TEST_CASE("two ranks stay bitwise identical and match single-process training") {
  TrainAndExpectSuccess(2);
}

TEST_CASE("three ranks stay bitwise identical and match single-process training") {
  TrainAndExpectSuccess(3);
}

TEST_CASE("shared memory: two and three ranks match single-process training") {
  TrainAndExpectSuccess(2, "shm");
  TrainAndExpectSuccess(3, "shm");
}

TEST_CASE("a peer that never joins fails the rendezvous within the timeout") {
  const std::string store = FreshTempPath("missing_peer.store");
  const Clock::time_point start = Clock::now();
  Worker lonely = SpawnWorker(WorkerBinary(), store, 0, 2, {"--timeout-ms", "2000"});
  Outcome outcome = Wait(lonely, start, std::chrono::seconds(20));
  INFO("stderr:\n" << outcome.err);
  CHECK(outcome.exited);
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.err.find("rendezvous failed") != std::string::npos);
  CHECK(outcome.seconds < 20);
}

TEST_CASE("a peer that dies mid-training makes the survivor fail, not hang") {
  const Outcome outcome =
      SurvivorOfKilledPeer(FreshTempPath("dying_peer.store"), {"--timeout-ms", "3000"}).first;
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.err.find("gloo") != std::string::npos);
}

TEST_CASE("shared memory: a peer that dies mid-training fails the survivor at once") {
  // A long timeout: the survivor must notice the death itself, not time out.
  const auto [outcome, victim] = SurvivorOfKilledPeer(
      FreshTempPath("dying_peer_shm.store"), {"--timeout-ms", "60000", "--backend", "shm"});
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.err.find("shared-memory") != std::string::npos);
  CHECK(outcome.err.find("rank 1 (pid " + std::to_string(victim) + ") exited") !=
        std::string::npos);
  CHECK(outcome.seconds < 10);
}

TEST_CASE("ranks with different networks all fail the broadcast") {
  const std::string store = FreshTempPath("wrong_shape.store");
  const Clock::time_point start = Clock::now();
  const std::vector<Worker> workers =
      SpawnWorkers(WorkerBinary(), store, 2, {"--timeout-ms", "10000", "--odd-rank", "1"});
  for (int rank = 0; rank < 2; ++rank) {
    Outcome outcome = Wait(workers[rank], start, std::chrono::seconds(60));
    INFO("rank " << rank << " stderr:\n" << outcome.err);
    CHECK(outcome.exited);
    CHECK(outcome.exit_code == 2);
    CHECK(outcome.err.find("the module differs from rank 0's on 1 rank(s)") != std::string::npos);
  }
}

}  // namespace
}  // namespace ember::sdk::testing
