// Runs model_sync_test_worker as separate processes (one per rank) and reads their exit codes
// and stderr. This test does not link LibTorch: it only spawns and waits.
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "sdk/sync/worker_testing.h"
#include "tests/support/process_testing.h"

namespace {

using ember::sdk::testing::Clock;
using ember::sdk::testing::FreshTempPath;
using ember::sdk::testing::Outcome;
using ember::sdk::testing::Wait;
using ember::sdk::testing::Worker;

std::string TempPath(const std::string& name) { return FreshTempPath(name); }

Worker Spawn(const std::string& store, int rank, int world, std::vector<std::string> extra) {
  return ember::sdk::testing::SpawnWorker(
      ember::testing::Runfile("sdk/sync/model_sync_test_worker"), store, rank, world, extra);
}

void TrainAndExpectSuccess(int world, const std::string& backend = "gloo") {
  const std::string store =
      TempPath("train" + std::to_string(world) + "_" + backend + ".store");
  const Clock::time_point start = Clock::now();
  std::vector<Worker> workers;
  for (int rank = 0; rank < world; ++rank) {
    workers.push_back(Spawn(store, rank, world,
                            {"--steps", "10", "--timeout-ms", "30000", "--backend", backend}));
  }
  for (int rank = 0; rank < world; ++rank) {
    Outcome outcome = Wait(workers[rank], start, std::chrono::seconds(90));
    INFO("rank " << rank << " of " << world << " stderr:\n" << outcome.err);
    CHECK(outcome.exited);
    CHECK(outcome.exit_code == 0);
    CHECK(outcome.err.find("ok after 10 steps") != std::string::npos);
  }
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
  const std::string store = TempPath("missing_peer.store");
  const Clock::time_point start = Clock::now();
  Worker lonely = Spawn(store, 0, 2, {"--timeout-ms", "2000"});
  Outcome outcome = Wait(lonely, start, std::chrono::seconds(20));
  INFO("stderr:\n" << outcome.err);
  CHECK(outcome.exited);
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.err.find("rendezvous failed") != std::string::npos);
  CHECK(outcome.seconds < 20);
}

TEST_CASE("a peer that dies mid-training makes the survivor fail, not hang") {
  const std::string store = TempPath("dying_peer.store");
  const Clock::time_point start = Clock::now();
  Worker survivor = Spawn(store, 0, 2, {"--timeout-ms", "3000"});
  Worker victim = Spawn(store, 1, 2, {"--timeout-ms", "3000", "--die-after-step", "3"});

  Outcome died = Wait(victim, start, std::chrono::seconds(60));
  INFO("rank 1 stderr:\n" << died.err);
  CHECK(died.signal == SIGKILL);
  CHECK(died.err.find("killing itself after step 3") != std::string::npos);

  const Clock::time_point death = Clock::now();
  Outcome outcome = Wait(survivor, death, std::chrono::seconds(20));
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.exited);
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.err.find("gloo") != std::string::npos);
}

TEST_CASE("shared memory: a peer that dies mid-training fails the survivor at once") {
  const std::string store = TempPath("dying_peer_shm.store");
  const Clock::time_point start = Clock::now();
  // A long timeout: the survivor must notice the death itself, not time out.
  Worker survivor = Spawn(store, 0, 2, {"--timeout-ms", "60000", "--backend", "shm"});
  Worker victim = Spawn(store, 1, 2,
                        {"--timeout-ms", "60000", "--die-after-step", "3", "--backend", "shm"});

  Outcome died = Wait(victim, start, std::chrono::seconds(60));
  INFO("rank 1 stderr:\n" << died.err);
  CHECK(died.signal == SIGKILL);

  const Clock::time_point death = Clock::now();
  Outcome outcome = Wait(survivor, death, std::chrono::seconds(20));
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.exited);
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.err.find("shared-memory") != std::string::npos);
  CHECK(outcome.err.find("rank 1 (pid " + std::to_string(victim.pid) + ") exited") !=
        std::string::npos);
  CHECK(outcome.seconds < 10);
}

TEST_CASE("ranks with different networks all fail the broadcast") {
  const std::string store = TempPath("wrong_shape.store");
  const Clock::time_point start = Clock::now();
  std::vector<Worker> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.push_back(Spawn(store, rank, 2, {"--timeout-ms", "10000", "--odd-rank", "1"}));
  }
  for (int rank = 0; rank < 2; ++rank) {
    Outcome outcome = Wait(workers[rank], start, std::chrono::seconds(60));
    INFO("rank " << rank << " stderr:\n" << outcome.err);
    CHECK(outcome.exited);
    CHECK(outcome.exit_code == 2);
    CHECK(outcome.err.find("the module differs from rank 0's on 1 rank(s)") != std::string::npos);
  }
}

}  // namespace
