// Two real emberd daemons as two nodes on loopback (own sockets, state dirs, ports and
// certificates from one per-test CA): node-a coordinates a job, node-b's rank leases its
// batches from node-a over mutual TLS. Every sample is served exactly once per epoch
// across both nodes, each rank gets the plan's slice of every global step, and a rank on
// a node whose dataset differs is refused with an error naming the node.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "daemon/peer/certs_testing.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using daemon::MakeTestCa;
using daemon::MakeTestNodeCert;
using daemon::TestKeypair;

// A daemon serving peers on 127.0.0.1:<any port> as `node`, with its certificate from `ca`.
std::unique_ptr<Daemon> NodeDaemon(const std::string& dir, const std::string& certs,
                                   const TestKeypair& ca, const std::string& node,
                                   const std::string& listen = "127.0.0.1:0",
                                   const std::string& more_yaml = "") {
  const TestKeypair keys = MakeTestNodeCert(certs, ca, node);
  REQUIRE(NewPosixEnv()->CreateDirs(dir).ok());
  return std::make_unique<Daemon>(
      dir, WriteDaemonConfig(dir, "listen: " + listen + "\n"
                                  "tls: {cert: " + keys.cert_path + ", key: " + keys.key_path +
                                  ", ca: " + ca.cert_path + "}\n"
                                  "node: " + node + "\n" + more_yaml));
}

std::string PeerAddress(const Daemon& daemon) {
  const std::string port = ReadFileOrEmpty(daemon.dir() + "/state/peer.port");
  REQUIRE(!port.empty());
  return "127.0.0.1:" + std::to_string(std::stoi(port));
}

struct RankRead {
  std::vector<std::vector<int64_t>> batches;  // sample ids, batch by batch, one epoch
  Status error;
};

RankRead ReadEpoch(Client& client, StreamOptions options) {
  options.sample_ids = true;
  options.epochs = 1;
  RankRead read;
  auto reader = client.OpenStream(options);
  if (!reader.ok()) {
    read.error = reader.status();
    return read;
  }
  for (;;) {
    auto next = (*reader)->Next();
    if (!next.ok()) {
      read.error = next.status();
      return read;
    }
    if (!next->has_value()) break;
    const RawBatch& batch = **next;
    const RawTensor* ids = nullptr;
    for (const RawTensor& t : batch.tensors)
      if (t.name == "sample_id") ids = &t;
    REQUIRE(ids != nullptr);
    std::vector<int64_t> values(batch.num_samples);
    std::memcpy(values.data(), ids->data, values.size() * sizeof(int64_t));
    read.batches.push_back(std::move(values));
  }
  return read;
}

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
  const std::string coordinator = PeerAddress(*a);

  StreamOptions options = ReaderOptions("two-nodes", 16, 1);
  options.world_size = 2;
  options.seed = 11;
  options.coordinator = coordinator;  // node-a names itself too: it coordinates
  StreamOptions rank1 = options;
  rank1.rank = 1;
  auto read1 = std::async(std::launch::async, [&] { return ReadEpoch(*client_b, rank1); });
  RankRead r0 = ReadEpoch(*client_a, options);
  RankRead r1 = read1.get();
  INFO(r0.error.ToString() << " / " << r1.error.ToString() << "\nnode-a:\n"
                           << a->log() << "\nnode-b:\n"
                           << b->log());
  REQUIRE(r0.error.ok());
  REQUIRE(r1.error.ok());
  REQUIRE(r0.batches.size() == 7);  // ceil(203 / 32) steps
  REQUIRE(r1.batches.size() == 7);

  // The same job on one node with one rank of batch 32 (the same global batch) has the
  // same samples in every step.
  StreamOptions single = ReaderOptions("one-node", 32, 1);
  single.seed = 11;
  RankRead whole = ReadEpoch(*client_a, single);
  REQUIRE(whole.error.ok());
  REQUIRE(whole.batches.size() == 7);
  std::vector<int64_t> all;
  for (size_t step = 0; step < 7; ++step) {
    std::vector<int64_t> two = r0.batches[step];
    two.insert(two.end(), r1.batches[step].begin(), r1.batches[step].end());
    CHECK(two == whole.batches[step]);  // rank 0 the first half, rank 1 the second
    all.insert(all.end(), two.begin(), two.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kSamples);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(all == expected);
  CHECK(a->log().find("job 'two-nodes' rank 1 joined from node 'node-b'") != std::string::npos);
}

// A loopback port that was free a moment ago (for a daemon that must come back on it).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST_CASE("the coordinating daemon killed and restarted mid-epoch: ranks carry on, exactly once") {
  TempDir tmp;
  const std::string certs = tmp.path() + "/certs";
  REQUIRE(NewPosixEnv()->CreateDirs(certs).ok());
  const TestKeypair ca = MakeTestCa(certs, "ca");
  const std::string coordinator = "127.0.0.1:" + std::to_string(FreePort());
  auto c = NodeDaemon(tmp.path() + "/c", certs, ca, "node-c", coordinator);
  auto a = NodeDaemon(tmp.path() + "/a", certs, ca, "node-a");
  auto b = NodeDaemon(tmp.path() + "/b", certs, ca, "node-b");
  constexpr uint32_t kSamples = 640;
  auto client_c = StartWithSyntheticDataset(*c, kSamples);
  auto client_a = StartWithSyntheticDataset(*a, kSamples);
  auto client_b = StartWithSyntheticDataset(*b, kSamples);

  StreamOptions options = ReaderOptions("survivor", 8, 1);  // 40 steps of 16
  options.world_size = 2;
  options.slots = 2;
  options.sample_ids = true;
  options.coordinator = coordinator;
  std::vector<std::unique_ptr<StreamReader>> readers;
  for (uint32_t r = 0; r < 2; ++r) {
    StreamOptions mine = options;
    mine.rank = r;
    auto reader = (r == 0 ? client_a : client_b)->OpenStream(mine);
    INFO(reader.status().ToString());
    REQUIRE(reader.ok());
    readers.push_back(std::move(reader).value());
  }
  std::vector<int64_t> seen;
  std::vector<uint64_t> batches(2, 0);
  // Reads up to `n` batches of rank r (fewer at the end of the epoch); false at its end.
  auto read = [&](uint32_t r, int n) {
    for (int i = 0; i < n; ++i) {
      auto next = readers[r]->Next();
      INFO(next.status().ToString() << "\nnode-a:\n" << a->log() << "\nnode-c:\n" << c->log());
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
  read(0, 12);
  read(1, 7);
  c->Kill();  // commits of the last group interval may be lost: the nodes report them
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c->Start();
  while (read(0, 1)) {
  }
  while (read(1, 1)) {
  }
  CHECK(batches[0] == 40);
  CHECK(batches[1] == 40);
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> expected(kSamples);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(seen == expected);
  CHECK(a->log().find("joining again through coordinator") != std::string::npos);
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
  REQUIRE(client_b->KvSet("kv-job", "gloo/addr", "10.0.0.7:4242").ok());
  Result<std::string> got = client_a->KvGet("kv-job", "gloo/addr", std::chrono::seconds(10));
  INFO(got.status().ToString() << "\n" << b->log());
  REQUIRE(got.ok());
  CHECK(*got == "10.0.0.7:4242");
  CHECK(*client_b->KvAdd("kv-job", "count", 2) == 2);
  CHECK(*client_a->KvAdd("kv-job", "count", 3) == 5);
  // A barrier of 2 with one rank per node returns on both.
  auto other = std::async(std::launch::async, [&] {
    return client_b->Barrier("kv-job", "start", 2, std::chrono::seconds(20));
  });
  Status here = client_a->Barrier("kv-job", "start", 2, std::chrono::seconds(20));
  CHECK(here.ok());
  CHECK(other.get().ok());
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
  auto b = NodeDaemon(tmp.path() + "/b", certs, ca, "node-b", "127.0.0.1:0",
                      "reconnect_timeout: 2\n");
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
