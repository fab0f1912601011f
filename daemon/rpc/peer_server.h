// PeerServer: the Cap'n Proto shell of the daemon-to-daemon interface (schemas/peer.capnp)
// served on each connection a PeerListener accepts. It only translates, into a PeerSession
// (daemon/service/peer_service.h), which holds the policy.
// Thread-safety: lives on the thread of the event loop serving its connection (the main
// loop's, or a peer loop's: then openJob goes to a PeerServer on the main loop, where the
// stores are, through `job_home`).
#ifndef EMBER_DAEMON_RPC_PEER_SERVER_H_
#define EMBER_DAEMON_RPC_PEER_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include <kj/timer.h>

#include "daemon/peer/loop_links.h"
#include "daemon/peer/peer_listener.h"
#include "daemon/service/peer_service.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {

class PeerServer final : public rpc::Peer::Server {
 public:
  // `service`: this daemon's peer side (its node name, the ledger of the jobs it
  // coordinates, and, on the main loop, the stores); `peer`: who connected; `timer`: the
  // stores' barriers (openJob), needed with PeerServiceDeps::service. All must outlive the
  // server and what it returns.
  PeerServer(PeerService& service, PeerInfo peer, kj::Timer* timer = nullptr)
      : service_(service), peer_(std::move(peer)), timer_(timer),
        session_(service, peer_.address) {}
  // For a connection served away from the main loop: openJob is forwarded to the Peer that
  // `job_home` connects (once, at the first openJob; a PeerServer with the stores on the
  // main loop, for this peer alone, so its memberships end with this connection).
  using JobHome = std::function<std::unique_ptr<LoopLinks::Link>()>;
  PeerServer(PeerService& service, PeerInfo peer, JobHome job_home)
      : service_(service), peer_(std::move(peer)), timer_(nullptr),
        job_home_(std::move(job_home)), session_(service, peer_.address) {}

 protected:
  // Fails with CheckPeerProtocol's error for another protocol version. hello, joinJob and
  // openJob fail with CheckNode's error for a node name that is not the certificate's.
  kj::Promise<void> hello(HelloContext context) override;
  // PeerSession::Join; the rank's Coordination capability holds its PeerRank.
  kj::Promise<void> joinJob(JoinJobContext context) override;
  // A Job capability (the store and barriers of `job`) for the calling node's ranks.
  kj::Promise<void> openJob(OpenJobContext context) override;
  // PeerSession::Exchange.
  kj::Promise<void> exchange(ExchangeContext context) override;

 private:
  // kPermissionDenied unless `claimed` is the name of the node the peer's certificate is
  // (its CN); anything goes with tls: off (no certificate: anyone reaching the port).
  Status CheckNode(const std::string& claimed) const;

  PeerService& service_;
  const PeerInfo peer_;
  kj::Timer* const timer_;
  const JobHome job_home_;
  std::unique_ptr<LoopLinks::Link> home_;  // job_home_'s, from the first openJob
  PeerSession session_;
  std::string hello_node_;  // the node named in hello (CheckNode passed it)
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_PEER_SERVER_H_
