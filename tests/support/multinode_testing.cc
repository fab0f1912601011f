#include "tests/support/multinode_testing.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <numeric>
#include <utility>

#include "common/env.h"

namespace ember::testing {

std::unique_ptr<Daemon> NodeDaemon(const std::string& dir, const std::string& certs,
                                   const daemon::TestKeypair& ca, const std::string& node,
                                   const std::string& host, std::vector<std::string> wrapper,
                                   int port, const std::string& more_yaml) {
  const std::string sans =
      host == "127.0.0.1" ? daemon::kLoopbackSans : "DNS:" + host + ",IP:" + host;
  const daemon::TestKeypair keys = daemon::MakeTestNodeCert(certs, ca, node, sans);
  REQUIRE(NewPosixEnv()->CreateDirs(dir).ok());
  return std::make_unique<Daemon>(
      dir,
      WriteDaemonConfig(dir, "listen: " + host + ":" + std::to_string(port) + "\n"
                             "tls: {cert: " + keys.cert_path + ", key: " + keys.key_path +
                             ", ca: " + ca.cert_path + "}\n"
                             "node: " + node + "\n" + more_yaml),
      std::move(wrapper));
}

daemon::TestKeypair TestCluster::MakeCa(const std::string& dir) {
  REQUIRE(NewPosixEnv()->CreateDirs(dir).ok());
  return daemon::MakeTestCa(dir, "ca");
}

std::unique_ptr<Daemon> TestCluster::Node(const std::string& name, int port,
                                          const std::string& yaml) {
  return NodeDaemon(tmp.path() + "/" + name, certs, ca, name, "127.0.0.1", {}, port, yaml);
}

std::string PeerAddress(const Daemon& daemon, const std::string& host) {
  const std::string port = ReadFileOrEmpty(daemon.dir() + "/state/peer.port");
  REQUIRE(!port.empty());
  return host + ":" + std::to_string(std::stoi(port));
}

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

void CheckOneJobOnTwoNodes(const Daemon& a, Client& client_a, const Daemon& b, Client& client_b,
                           const std::string& coordinator, uint32_t samples,
                           const std::string& node_b) {
  const size_t steps = (samples + 31) / 32;
  StreamOptions options = ReaderOptions("two-nodes", 16, 1);
  options.world_size = 2;
  options.seed = 11;
  options.coordinator = coordinator;
  StreamOptions rank1 = options;
  rank1.rank = 1;
  auto read1 = std::async(std::launch::async, [&] { return ReadEpoch(client_b, rank1); });
  RankRead r0 = ReadEpoch(client_a, options);
  RankRead r1 = read1.get();
  INFO(r0.error.ToString() << " / " << r1.error.ToString() << "\nnode a:\n"
                           << a.log() << "\nnode b:\n"
                           << b.log());
  REQUIRE(r0.error.ok());
  REQUIRE(r1.error.ok());
  REQUIRE(r0.batches.size() == steps);
  REQUIRE(r1.batches.size() == steps);

  // The same job on one node with one rank of batch 32 (the same global batch) has the
  // same samples in every step.
  StreamOptions single = ReaderOptions("one-node", 32, 1);
  single.seed = 11;
  RankRead whole = ReadEpoch(client_a, single);
  REQUIRE(whole.error.ok());
  REQUIRE(whole.batches.size() == steps);
  std::vector<int64_t> all;
  for (size_t step = 0; step < steps; ++step) {
    std::vector<int64_t> two = r0.batches[step];
    two.insert(two.end(), r1.batches[step].begin(), r1.batches[step].end());
    CHECK(two == whole.batches[step]);  // rank 0 the first half, rank 1 the second
    all.insert(all.end(), two.begin(), two.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(samples);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(all == expected);
  CHECK(a.log().find("job 'two-nodes': rank 1 joined from node '" + node_b + "'") !=
        std::string::npos);
}

void CheckSharedKeyValueStore(Client& client_a, Client& client_b, const Daemon& b) {
  REQUIRE(client_b.KvSet("kv-job", "gloo/addr", "10.0.0.7:4242").ok());
  Result<std::string> got = client_a.KvGet("kv-job", "gloo/addr", std::chrono::seconds(10));
  INFO(got.status().ToString() << "\n" << b.log());
  REQUIRE(got.ok());
  CHECK(*got == "10.0.0.7:4242");
  CHECK(*client_b.KvAdd("kv-job", "count", 2) == 2);
  CHECK(*client_a.KvAdd("kv-job", "count", 3) == 5);
  // A barrier of 2 with one rank per node returns on both.
  auto other = std::async(std::launch::async, [&] {
    return client_b.Barrier("kv-job", "start", 2, std::chrono::seconds(20));
  });
  Status here = client_a.Barrier("kv-job", "start", 2, std::chrono::seconds(20));
  CHECK(here.ok());
  CHECK(other.get().ok());
}

}  // namespace ember::testing
