// Two real emberd daemons as two nodes on loopback (own sockets, state dirs, ports and
// certificates from one per-test CA): node-a coordinates a job, node-b's rank leases its
// batches from node-a over mutual TLS. Every sample is served exactly once per epoch
// across both nodes, each rank gets the plan's slice of every global step, and a rank on
// a node whose dataset differs is refused with an error naming the node.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <string>

#include "common/env.h"
#include "daemon/peer/certs_testing.h"
#include "tests/support/multinode_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using daemon::MakeTestCa;
using daemon::TestKeypair;

TEST_CASE("two nodes serve one job: each rank its slice of every step, every sample once") {
  TempDir tmp;
  const std::string certs = tmp.path() + "/certs";
  REQUIRE(NewPosixEnv()->CreateDirs(certs).ok());
  const TestKeypair ca = MakeTestCa(certs, "ca");
  auto a = NodeDaemon(tmp.path() + "/a", certs, ca, "node-a");
  auto b = NodeDaemon(tmp.path() + "/b", certs, ca, "node-b");
  constexpr uint32_t kSamples = 203;
  auto client_a = StartWithSyntheticDataset(*a, kSamples);
  auto client_b = StartWithSyntheticDataset(*b, kSamples);
  // node-a names itself too: it coordinates.
  CheckOneJobOnTwoNodes(*a, *client_a, *b, *client_b, PeerAddress(*a), kSamples, "node-b");
}

TEST_CASE("ranks on two nodes share the coordinator's key-value store and barriers") {
  TempDir tmp;
  const std::string certs = tmp.path() + "/certs";
  REQUIRE(NewPosixEnv()->CreateDirs(certs).ok());
  const TestKeypair ca = MakeTestCa(certs, "ca");
  auto a = NodeDaemon(tmp.path() + "/a", certs, ca, "node-a");
  auto b = NodeDaemon(tmp.path() + "/b", certs, ca, "node-b");
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
  TempDir tmp;
  const std::string certs = tmp.path() + "/certs";
  REQUIRE(NewPosixEnv()->CreateDirs(certs).ok());
  const TestKeypair ca = MakeTestCa(certs, "ca");
  auto a = NodeDaemon(tmp.path() + "/a", certs, ca, "node-a");
  auto b = NodeDaemon(tmp.path() + "/b", certs, ca, "node-b");
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
  TempDir tmp;
  const std::string certs = tmp.path() + "/certs";
  REQUIRE(NewPosixEnv()->CreateDirs(certs).ok());
  const TestKeypair ca = MakeTestCa(certs, "ca");
  auto b = NodeDaemon(tmp.path() + "/b", certs, ca, "node-b");
  auto client_b = StartWithSyntheticDataset(*b, 100);
  StreamOptions options = ReaderOptions("nobody-home", 10, 1);
  options.world_size = 2;
  options.rank = 1;
  options.coordinator = "127.0.0.1:1";  // nothing listens there
  RankRead r = ReadEpoch(*client_b, options);
  REQUIRE(!r.error.ok());
  CHECK_THAT(r.error.message(), Catch::Contains("127.0.0.1:1"));
}

}  // namespace
}  // namespace ember::testing
