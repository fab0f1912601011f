// Two real emberd daemons as two nodes on loopback (own sockets, state dirs, ports and
// certificates from one per-test CA): node-a coordinates a job, node-b's rank leases its
// batches from node-a over mutual TLS. Every sample is served exactly once per epoch
// across both nodes, each rank gets the plan's slice of every global step, and a rank on
// a node whose dataset differs is refused with an error naming the node.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <algorithm>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/net_testing.h"
#include "daemon/peer/certs_testing.h"
#include "tests/support/multinode_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using daemon::MakeTestCa;
using daemon::TestKeypair;

TEST_CASE("two nodes serve one job: each rank its slice of every step, every sample once") {
  TestCluster cluster;
  auto a = cluster.Node("node-a");
  auto b = cluster.Node("node-b");
  constexpr uint32_t kSamples = 203;
  auto client_a = StartWithSyntheticDataset(*a, kSamples);
  auto client_b = StartWithSyntheticDataset(*b, kSamples);
  // node-a names itself too: it coordinates.
  CheckOneJobOnTwoNodes(*a, *client_a, *b, *client_b, PeerAddress(*a), kSamples, "node-b");
}

TEST_CASE("each node's status lists the job: the coordinator all ranks, the other node its own") {
  TestCluster cluster;
  auto a = cluster.Node("node-a");
  auto b = cluster.Node("node-b");
  auto client_a = StartWithSyntheticDataset(*a, 203);
  auto client_b = StartWithSyntheticDataset(*b, 203);
  StreamOptions options = ReaderOptions("watched", 16, 1);
  options.world_size = 2;
  options.coordinator = PeerAddress(*a);
  StreamOptions rank1 = options;
  rank1.rank = 1;
  auto reader1 = client_b->OpenStream(rank1);
  REQUIRE(reader1.ok());
  auto first = (*reader1)->Next();  // rank 1 holds its first batch: a lease in flight
  INFO(first.status().ToString() << "\nnode b:\n" << b->log());
  REQUIRE(first.ok());
  REQUIRE(first->has_value());

  Result<DaemonStatus> at_b = client_b->GetStatus();
  REQUIRE(at_b.ok());
  REQUIRE(at_b->jobs.size() == 1);
  const JobStatus& proxied = at_b->jobs[0];
  CHECK(proxied.job == "watched");
  CHECK(proxied.coordinator == PeerAddress(*a));
  CHECK(proxied.world_size == 2);
  CHECK(proxied.batches_per_rank == 7);
  REQUIRE(proxied.ranks.size() == 1);  // only node-b's rank
  CHECK(proxied.ranks[0].rank == 1);
  CHECK(proxied.ranks[0].joined);
  CHECK(proxied.ranks[0].node == "node-b");
  CHECK(proxied.ranks[0].leased >= 1);

  Result<DaemonStatus> at_a = client_a->GetStatus();
  REQUIRE(at_a.ok());
  REQUIRE(at_a->jobs.size() == 1);
  CHECK(at_a->jobs[0].coordinator.empty());
  REQUIRE(at_a->jobs[0].ranks.size() == 2);
  CHECK_FALSE(at_a->jobs[0].ranks[0].joined);
  CHECK(at_a->jobs[0].ranks[1].joined);
  CHECK(at_a->jobs[0].ranks[1].node == "node-b");
}

TEST_CASE("the coordinating daemon killed and restarted mid-epoch: ranks carry on, exactly once") {
  // Rank 0 on node-a, ranks 1 and 2 on node-b (whose daemon speaks for both at once). The
  // job's store and barriers come back too: the final barrier and a key-value round trip
  // after the restart, and the keys set before it, set again by their members.
  TestCluster cluster;
  const int port = FreeLoopbackPort();
  const std::string coordinator = "127.0.0.1:" + std::to_string(port);
  auto c = cluster.Node("node-c", port);
  auto a = cluster.Node("node-a");
  auto b = cluster.Node("node-b");
  constexpr uint32_t kSamples = 720;
  auto client_c = StartWithSyntheticDataset(*c, kSamples);
  auto client_a = StartWithSyntheticDataset(*a, kSamples);
  auto client_b = StartWithSyntheticDataset(*b, kSamples);

  StreamOptions options = ReaderOptions("survivor", 8, 1);  // 30 steps of 24
  options.world_size = 3;
  options.slots = 2;
  options.sample_ids = true;
  options.coordinator = coordinator;
  std::vector<std::unique_ptr<StreamReader>> readers;
  for (uint32_t r = 0; r < 3; ++r) {
    StreamOptions mine = options;
    mine.rank = r;
    auto reader = (r == 0 ? client_a : client_b)->OpenStream(mine);
    INFO(reader.status().ToString());
    REQUIRE(reader.ok());
    readers.push_back(std::move(reader).value());
  }
  std::vector<int64_t> seen;
  std::vector<uint64_t> batches(3, 0);
  // Reads up to `n` batches of rank r (fewer at the end of the epoch); false at its end.
  auto read = [&](uint32_t r, int n) {
    for (int i = 0; i < n; ++i) {
      auto next = readers[r]->Next();
      INFO(next.status().ToString() << "\nnode-a:\n" << a->log() << "\nnode-b:\n" << b->log()
                                    << "\nnode-c:\n" << c->log());
      REQUIRE(next.ok());
      if (!next->has_value()) return false;
      const RawBatch& batch = **next;
      for (const RawTensor& t : batch.tensors)
        if (t.name == "sample_id") {
          const auto* ids = static_cast<const int64_t*>(t.data);
          seen.insert(seen.end(), ids, ids + batch.num_samples);
        }
      ++batches[r];
    }
    return true;
  };
  // As ember-run --coordinator sets it for every rank of every node.
  ::setenv("EMBER_COORDINATOR", coordinator.c_str(), 1);
  REQUIRE(client_a->KvSet("survivor", "addr-0", "10.0.0.1:29500").ok());
  REQUIRE(client_a->KvAdd("survivor", "joined", 1).ok());
  REQUIRE(client_b->KvAdd("survivor", "joined", 2).ok());
  // Two barriers passed before the restart: the rounds the members name afterwards.
  for (int round = 0; round < 2; ++round) {
    auto other = std::async(std::launch::async, [&] {
      return client_b->Barrier("survivor", "step", 2, std::chrono::seconds(20));
    });
    REQUIRE(client_a->Barrier("survivor", "step", 2, std::chrono::seconds(20)).ok());
    REQUIRE(other.get().ok());
  }
  read(0, 12);
  read(1, 7);
  read(2, 4);
  {
    // The coordinator knows the node of each rank (emberctl jobs shows it).
    Result<DaemonStatus> status = client_c->GetStatus();
    REQUIRE(status.ok());
    REQUIRE(status->jobs.size() == 1);
    REQUIRE(status->jobs[0].ranks.size() == 3);
    CHECK(status->jobs[0].ranks[0].node == "node-a");
    CHECK(status->jobs[0].ranks[1].node == "node-b");
    CHECK(status->jobs[0].ranks[2].node == "node-b");
  }
  c->Kill();  // commits of the last group interval may be lost: the nodes report them
  {
    // While it is down, a store call that does not wait for it names the link that failed.
    ClientOptions impatient;
    impatient.socket_path = b->socket();
    impatient.rejoin_timeout = std::chrono::milliseconds(0);
    auto client = Client::Connect(impatient);
    REQUIRE(client.ok());
    Result<bool> present = (*client)->KvCheck("survivor", {"addr-0"});
    INFO(present.status().ToString());
    CHECK(present.status().code() == StatusCode::kUnavailable);
    CHECK_THAT(present.status().message(), Catch::Contains(coordinator));
    CHECK_THAT(present.status().message(), !Catch::Contains("connection to emberd lost"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c->Start();
  while (read(0, 1)) {
  }
  while (read(1, 1)) {
  }
  while (read(2, 1)) {
  }
  CHECK(batches[0] == 30);
  CHECK(batches[1] == 30);
  CHECK(batches[2] == 30);
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> expected(kSamples);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(seen == expected);
  CHECK(a->log().find("joining again through coordinator") != std::string::npos);
  CHECK(b->log().find("job 'survivor': rank 2: joining again through coordinator") !=
        std::string::npos);

  // The final barrier, on both nodes, through the restarted coordinator.
  auto other = std::async(std::launch::async, [&] {
    return client_b->Barrier("survivor", "final", 2, std::chrono::seconds(30));
  });
  Status here = client_a->Barrier("survivor", "final", 2, std::chrono::seconds(30));
  Status there = other.get();
  INFO(here.ToString() << " / " << there.ToString() << "\nnode-b:\n" << b->log()
                       << "\nnode-c:\n" << c->log());
  CHECK(here.ok());
  CHECK(there.ok());
  // The barrier passed twice before the restart goes on from its third round.
  auto third = std::async(std::launch::async, [&] {
    return client_b->Barrier("survivor", "step", 2, std::chrono::seconds(30));
  });
  CHECK(client_a->Barrier("survivor", "step", 2, std::chrono::seconds(30)).ok());
  CHECK(third.get().ok());
  // A key-value round trip, and the keys set before the restart, set again by their
  // members when they joined the new coordinator.
  REQUIRE(client_b->KvSet("survivor", "after", "b").ok());
  Result<std::string> after = client_a->KvGet("survivor", "after", std::chrono::seconds(10));
  INFO(after.status().ToString());
  CHECK((after.ok() && *after == "b"));
  Result<std::string> addr = client_b->KvGet("survivor", "addr-0", std::chrono::seconds(10));
  INFO(addr.status().ToString());
  CHECK((addr.ok() && *addr == "10.0.0.1:29500"));
  Result<std::string> joined = client_a->KvGet("survivor", "joined", std::chrono::seconds(10));
  CHECK((joined.ok() && *joined == "3"));
  ::unsetenv("EMBER_COORDINATOR");
}

TEST_CASE("streams closed mid-epoch on the node that does not coordinate, 50 times: no hang") {
  // Each close comes while the stream's producer waits for the coordinator's next lease
  // (slots 2: it leases as the rank reads); the daemon must close it at once and go on
  // answering.
  TestCluster cluster;
  auto a = cluster.Node("node-a");
  auto b = cluster.Node("node-b");
  constexpr uint32_t kSamples = 4096;
  auto client_a = StartWithSyntheticDataset(*a, kSamples);
  auto client_b = StartWithSyntheticDataset(*b, kSamples);
  const std::string coordinator = PeerAddress(*a);
  using Clock = std::chrono::steady_clock;
  std::chrono::milliseconds slowest(0);
  for (int cycle = 0; cycle < 50; ++cycle) {
    StreamOptions options = ReaderOptions("closer-" + std::to_string(cycle), 8, 1);
    options.world_size = 1;
    options.slots = 2;
    options.coordinator = coordinator;
    const auto start = Clock::now();
    {
      auto reader = client_b->OpenStream(options);
      INFO("cycle " << cycle << ": " << reader.status().ToString() << "\nnode-b:\n" << b->log());
      REQUIRE(reader.ok());
      for (int i = 0; i < 1 + cycle % 3; ++i) {
        auto next = (*reader)->Next();
        REQUIRE(next.ok());
        REQUIRE(next->has_value());
      }
    }  // closed here, mid-epoch
    Result<DaemonStatus> status = client_b->GetStatus();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    slowest = std::max(slowest, took);
    INFO("cycle " << cycle << " took " << took.count() << " ms\nnode-b:\n" << b->log());
    REQUIRE(status.ok());
    REQUIRE(took < std::chrono::seconds(5));
  }
  // Every stream went: none left open on either node.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  Result<DaemonStatus> status = client_b->GetStatus();
  while (status.ok() && !status->streams.empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    status = client_b->GetStatus();
  }
  REQUIRE(status.ok());
  CHECK(status->streams.empty());
  INFO("slowest cycle " << slowest.count() << " ms");
  b->Stop();  // SIGTERM ends it cleanly (fails the test otherwise)
}

TEST_CASE("ranks on two nodes share the coordinator's key-value store and barriers") {
  TestCluster cluster;
  auto a = cluster.Node("node-a");
  auto b = cluster.Node("node-b");
  a->Start();
  b->Start();
  // As ember-run --coordinator sets it for every rank of every node.
  ::setenv("EMBER_COORDINATOR", PeerAddress(*a).c_str(), 1);
  auto client_a = a->Connect();
  auto client_b = b->Connect();
  CheckSharedKeyValueStore(*client_a, *client_b, *b);
  // Shared memory stays node-local.
  Result<int> segment = client_b->OpenSharedMemory("kv-job", "grads", 0, 2, 4096);
  INFO(segment.status().ToString());
  CHECK(segment.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(segment.status().message(), Catch::Contains("node-local"));
  ::unsetenv("EMBER_COORDINATOR");
}

TEST_CASE("a rank on a node whose dataset differs is refused, naming the node") {
  TestCluster cluster;
  auto a = cluster.Node("node-a");
  auto b = cluster.Node("node-b");
  auto client_a = StartWithSyntheticDataset(*a, 200);
  auto client_b = StartWithSyntheticDataset(*b, 210);  // another copy

  StreamOptions options = ReaderOptions("mismatch", 10, 1);
  options.world_size = 2;
  options.coordinator = PeerAddress(*a);
  auto reader0 = client_a->OpenStream(options);
  REQUIRE(reader0.ok());
  StreamOptions rank1 = options;
  rank1.rank = 1;
  RankRead r1 = ReadEpoch(*client_b, rank1);
  INFO(b->log());
  REQUIRE(!r1.error.ok());
  CHECK_THAT(r1.error.message(), Catch::Contains("node 'node-b'"));
  CHECK_THAT(r1.error.message(), Catch::Contains("num_samples"));
  CHECK_THAT(r1.error.message(), Catch::Contains("has 200"));
}

TEST_CASE("a coordinator that cannot be reached fails the rank's stream, not hangs") {
  TestCluster cluster;
  auto b = cluster.Node("node-b", 0, "reconnect_timeout: 2\n");
  auto client_b = StartWithSyntheticDataset(*b, 100);
  StreamOptions options = ReaderOptions("nobody-home", 10, 1);
  options.world_size = 2;
  options.rank = 1;
  options.coordinator = "127.0.0.1:1";  // nothing listens there
  RankRead r = ReadEpoch(*client_b, options);
  REQUIRE(!r.error.ok());
  CHECK_THAT(r.error.message(), Catch::Contains("127.0.0.1:1"));
  CHECK_THAT(r.error.message(), Catch::Contains("gave up after 2 s"));
}

}  // namespace
}  // namespace ember::testing
