// PeerServer: the Cap'n Proto shell of the daemon-to-daemon interface (schemas/peer.capnp)
// served on each connection a PeerListener accepts. It only translates; coordination logic
// lives outside daemon/rpc.
// Thread-safety: lives on the RPC event-loop thread.
#ifndef EMBER_DAEMON_RPC_PEER_SERVER_H_
#define EMBER_DAEMON_RPC_PEER_SERVER_H_

#include <string>

#include "daemon/coordinator/job_coordinator.h"
#include "daemon/peer/peer_listener.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {

class PeerServer final : public rpc::Peer::Server {
 public:
  // `node`: this daemon's node name (config key `node`); `peer`: who connected; `jobs`:
  // the jobs this daemon coordinates (its JobLedger; null: it coordinates none, joinJob
  // fails with failed_precondition). `jobs` must outlive the server and what it returns.
  PeerServer(std::string node, PeerInfo peer, JobCoordinator* jobs = nullptr)
      : node_(std::move(node)), peer_(std::move(peer)), jobs_(jobs) {}

 protected:
  // Fails with CheckPeerProtocol's error for another protocol version.
  kj::Promise<void> hello(HelloContext context) override;
  // Joins the rank in `jobs`; the error names the calling node.
  kj::Promise<void> joinJob(JoinJobContext context) override;

 private:
  const std::string node_;
  const PeerInfo peer_;
  JobCoordinator* const jobs_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_PEER_SERVER_H_
