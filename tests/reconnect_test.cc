// A trainer's Loader survives its emberd being killed and restarted (as systemd does) on
// the same socket and state dir: it reconnects with backoff and goes on after the batches
// it already received, so every sample is still read exactly once per epoch, also when the
// daemon is one node's of a job that spans two. A daemon that never comes back ends the
// wait at the deadline with an error naming the socket.
// LibTorch first: its glog CHECK must not shadow Catch2's.
#include "ember/loader.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/support/multinode_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

std::vector<int64_t> Ids(const Batch& batch) {
  const torch::Tensor ids = batch.at("sample_id");
  return std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
}

TEST_CASE("emberd killed and restarted mid-epoch: the Loader carries on, exactly once") {
  Daemon daemon;
  constexpr uint32_t kSamples = 300;
  auto client = StartWithSyntheticDataset(daemon, kSamples);
  StreamOptions options = ReaderOptions("survive-restart", 10, 2);
  options.sample_ids = true;
  options.slots = 3;
  Loader loader(*client, options, std::nullopt, std::chrono::seconds(30));

  std::vector<std::vector<int64_t>> seen(2);
  for (int i = 0; i < 7; ++i) {
    std::optional<Batch> batch = loader.Next();
    REQUIRE(batch.has_value());
    const auto ids = Ids(*batch);
    seen[0].insert(seen[0].end(), ids.begin(), ids.end());
  }
  daemon.Kill();
  // Restarted a little later, as systemd's RestartSec would.
  std::thread restart([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    daemon.Start();
  });
  for (int epoch = 0; epoch < 2; ++epoch) {
    while (std::optional<Batch> batch = loader.Next()) {
      CHECK(batch->epoch == static_cast<uint64_t>(epoch));
      const auto ids = Ids(*batch);
      seen[epoch].insert(seen[epoch].end(), ids.begin(), ids.end());
    }
  }
  restart.join();
  CHECK(loader.reconnects() == 1);
  std::vector<int64_t> expected(kSamples);
  std::iota(expected.begin(), expected.end(), 0);
  for (auto& ids : seen) {
    std::sort(ids.begin(), ids.end());
    CHECK(ids == expected);
  }
}

TEST_CASE("a daemon that does not come back ends the wait at the deadline, naming it") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 100);
  Loader loader(*client, ReaderOptions("no-return", 10, 1), std::nullopt,
                std::chrono::seconds(2));
  REQUIRE(loader.Next().has_value());
  daemon.Kill();
  const auto start = std::chrono::steady_clock::now();
  try {
    while (loader.Next()) {
    }
    FAIL("Next returned without the daemon");
  } catch (const c10::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("gave up reconnecting"));
    CHECK_THAT(e.what(), Catch::Contains(daemon.socket()));
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("emberd restarted during a barrier: both ranks reconnect and meet; keys come back") {
  Daemon daemon;
  daemon.Start();
  auto rank0 = daemon.Connect();
  auto rank1 = daemon.Connect();
  REQUIRE(rank0->KvSet("meet", "addr", "10.0.0.1:29500").ok());
  // Rank 0 waits in the barrier when its daemon (the job's coordinator) dies.
  auto waiting = std::async(std::launch::async, [&] {
    return rank0->Barrier("meet", "start", 2, std::chrono::seconds(30));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  daemon.Kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  daemon.Start();
  // Rank 1 arrives after the restart, over its dead connection first.
  Status here = rank1->Barrier("meet", "start", 2, std::chrono::seconds(30));
  Status there = waiting.get();
  INFO(here.ToString() << " / " << there.ToString() << "\n" << daemon.log());
  CHECK(here.ok());
  CHECK(there.ok());
  CHECK(rank0->connected());
  // Rank 0 set its key again on joining the restarted daemon.
  Result<std::string> addr = rank1->KvGet("meet", "addr", std::chrono::seconds(10));
  INFO(addr.status().ToString());
  CHECK((addr.ok() && *addr == "10.0.0.1:29500"));
}

TEST_CASE("a barrier that times out after its coordinator restarted says so") {
  Daemon daemon;
  daemon.Start();
  auto rank0 = daemon.Connect();
  auto rank1 = daemon.Connect();
  auto other = std::async(std::launch::async, [&] {
    return rank0->Barrier("alone", "b", 2, std::chrono::seconds(20));
  });
  REQUIRE(rank1->Barrier("alone", "b", 2, std::chrono::seconds(20)).ok());
  REQUIRE(other.get().ok());
  daemon.Kill();
  daemon.Start();
  // Rank 0 does not come again: rank 1 waits in round 2 until its timeout.
  Status alone = rank1->Barrier("alone", "b", 2, std::chrono::milliseconds(1500));
  CHECK(alone.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(alone.message(), Catch::StartsWith("barrier 'b' of job 'alone' (2 ranks): timed out"));
  CHECK_THAT(alone.message(),
             Catch::EndsWith("(the job's coordinator restarted meanwhile; a member that passed "
                             "this round before the restart arrives again only at its next "
                             "barrier)"));
}

TEST_CASE("a lost daemon fails a store call at its deadline, naming the socket") {
  Daemon daemon;
  daemon.Start();
  ClientOptions options;
  options.socket_path = daemon.socket();
  options.rejoin_timeout = std::chrono::milliseconds(300);
  auto client = Client::Connect(options);
  REQUIRE(client.ok());
  REQUIRE((*client)->KvSet("gone", "k", "v").ok());
  daemon.Kill();
  const auto start = std::chrono::steady_clock::now();
  Status set = (*client)->KvSet("gone", "k", "w");
  INFO(set.ToString());
  CHECK(set.code() == StatusCode::kUnavailable);
  CHECK_THAT(set.message(), Catch::Contains(daemon.socket()));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("a node's daemon killed and restarted mid-epoch: its rank's Loader carries on") {
  TestCluster cluster;
  auto a = cluster.Node("node-a");
  auto b = cluster.Node("node-b");
  constexpr uint32_t kSamples = 400;
  auto client_a = StartWithSyntheticDataset(*a, kSamples);
  auto client_b = StartWithSyntheticDataset(*b, kSamples);
  StreamOptions options = ReaderOptions("node-restart", 10, 1);  // 20 steps of 20
  options.world_size = 2;
  options.slots = 2;
  options.sample_ids = true;
  options.coordinator = PeerAddress(*a);
  std::vector<int64_t> seen;
  auto take = [&](const Batch& batch) {
    const torch::Tensor ids = batch.at("sample_id");
    seen.insert(seen.end(), ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  };
  // Rank 0 on node-a reads its whole epoch meanwhile (its batches do not wait for rank 1).
  auto rank0 = std::async(std::launch::async, [&] {
    std::vector<int64_t> ids;
    RankRead read = ReadEpoch(*client_a, options);
    for (const auto& batch : read.batches) ids.insert(ids.end(), batch.begin(), batch.end());
    return std::make_pair(read.error, ids);
  });
  StreamOptions mine = options;
  mine.rank = 1;
  Loader loader(*client_b, mine, std::nullopt, std::chrono::seconds(30));
  for (int i = 0; i < 6; ++i) {
    std::optional<Batch> batch = loader.Next();
    REQUIRE(batch.has_value());
    take(*batch);
  }
  b->Kill();
  std::thread restart([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    b->Start();
  });
  uint64_t batches = 6;
  while (std::optional<Batch> batch = loader.Next()) {
    take(*batch);
    ++batches;
  }
  restart.join();
  auto [error0, ids0] = rank0.get();
  INFO(error0.ToString() << "\nnode-a:\n" << a->log());
  REQUIRE(error0.ok());
  CHECK(batches == 20);
  CHECK(loader.reconnects() == 1);
  seen.insert(seen.end(), ids0.begin(), ids0.end());
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> expected(kSamples);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(seen == expected);
}

}  // namespace
}  // namespace ember::testing
