// Helpers for tests with emberd daemons as several nodes (tests only): a node's daemon
// with its certificate from a per-test CA, its peer address, one rank's epoch, and the
// checks that every node-count test makes of one job across two nodes. Every helper
// fails the running Catch2 test (REQUIRE) when a step fails.
#ifndef EMBER_TESTS_SUPPORT_MULTINODE_TESTING_H_
#define EMBER_TESTS_SUPPORT_MULTINODE_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/peer/certs_testing.h"
#include "ember/client.h"
#include "ember/status.h"
#include "tests/support/test_env.h"

namespace ember::testing {

// A daemon (not started) in `dir` (created) serving peers on <host>:<any port> as `node`,
// with a certificate from `ca` (made in `certs`) that peers accept for `host`
// (peer_connector.h's rule). `wrapper` as for Daemon; `port` 0: any free one;
// `more_yaml`: more config keys.
std::unique_ptr<Daemon> NodeDaemon(const std::string& dir, const std::string& certs,
                                   const daemon::TestKeypair& ca, const std::string& node,
                                   const std::string& host = "127.0.0.1",
                                   std::vector<std::string> wrapper = {}, int port = 0,
                                   const std::string& more_yaml = "");

// A per-test directory, the CA of its nodes' certificates, and its nodes' daemons.
struct TestCluster {
  TempDir tmp;
  const std::string certs = tmp.path() + "/certs";
  const daemon::TestKeypair ca = MakeCa(certs);

  // A loopback node (see NodeDaemon), not started; `port` 0: any free one; `yaml`: more
  // config keys.
  std::unique_ptr<Daemon> Node(const std::string& name, int port = 0,
                               const std::string& yaml = "");
  static daemon::TestKeypair MakeCa(const std::string& dir);
};

// <host>:<the port a started daemon wrote to <state_dir>/peer.port>.
std::string PeerAddress(const Daemon& daemon, const std::string& host = "127.0.0.1");

// What one rank read of one epoch.
struct RankRead {
  std::vector<std::vector<int64_t>> batches;  // sample ids, batch by batch
  Status error;                               // why the stream ended early, if it did
};

// Reads one epoch of `options` (with sample ids) through `client`; blocks until the
// stream ends or fails.
RankRead ReadEpoch(Client& client, StreamOptions options);

// Serves job "two-nodes" (2 ranks of batch 16, coordinated at `coordinator`) with rank 0
// through `a` and rank 1 through `b` concurrently, both daemons started with the same
// `samples` synthetic samples as dataset "syn", and checks that each rank gets its half of
// every global step of the one-rank plan of batch 32, every sample exactly once, and that
// `a` logged rank 1 joining from node `node_b`.
void CheckOneJobOnTwoNodes(const Daemon& a, Client& client_a, const Daemon& b, Client& client_b,
                           const std::string& coordinator, uint32_t samples,
                           const std::string& node_b);

// Checks that `client_a` and `client_b`, clients of two nodes' daemons whose process has
// $EMBER_COORDINATOR set to one of them (as ember-run sets it), share job "kv-job"'s
// key-value store (set on one, get on the other), counters and a barrier of 2. `b` (b's
// daemon) for its log.
void CheckSharedKeyValueStore(Client& client_a, Client& client_b, const Daemon& b);

}  // namespace ember::testing

#endif  // EMBER_TESTS_SUPPORT_MULTINODE_TESTING_H_
