// PeerServer: the Cap'n Proto shell of the daemon-to-daemon interface (schemas/peer.capnp)
// served on each connection a PeerListener accepts. It only translates; coordination logic
// lives outside daemon/rpc.
// Thread-safety: lives on the thread of the event loop serving its connection (the main
// loop's, or a peer loop's: then openJob goes to a PeerServer on the main loop, where the
// stores are, through `job_home`).
#ifndef EMBER_DAEMON_RPC_PEER_SERVER_H_
#define EMBER_DAEMON_RPC_PEER_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <kj/timer.h>

#include "daemon/coordinator/job_ledger.h"
#include "daemon/peer/loop_links.h"
#include "daemon/peer/peer_listener.h"
#include "daemon/service/daemon_service.h"
#include "daemon/service/session.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {

class PeerServer final : public rpc::Peer::Server {
 public:
  // The ranks of one connection: those joined, by job (a rank's Coordination adds it and
  // removes it when released), and why the latest joinJob of each refused one was
  // refused, the answer to its exchange entries (at most kMaxRefusals kept).
  struct Members {
    static constexpr size_t kMaxRefusals = 1024;
    std::map<std::string, std::set<uint32_t>> joined;
    std::map<std::pair<std::string, uint32_t>, Status> refused;
  };

  // `node`: this daemon's node name (config key `node`); `peer`: who connected; `jobs`:
  // the jobs this daemon coordinates (its JobLedger); `service` and `timer`: their stores
  // and barriers (openJob). Null: this daemon coordinates none, and joinJob / openJob fail
  // with failed_precondition. All must outlive the server and what it returns.
  PeerServer(std::string node, PeerInfo peer, JobLedger* jobs = nullptr,
             DaemonService* service = nullptr, kj::Timer* timer = nullptr)
      : node_(std::move(node)), peer_(std::move(peer)), jobs_(jobs), service_(service),
        timer_(timer) {}
  // For a connection served away from the main loop: `jobs` as above (thread-safe);
  // openJob is forwarded to the Peer that `job_home` connects (once, at the first openJob;
  // a PeerServer with `service` and `timer` on the main loop, for this peer alone, so its
  // memberships end with this connection).
  using JobHome = std::function<std::unique_ptr<LoopLinks::Link>()>;
  PeerServer(std::string node, PeerInfo peer, JobLedger* jobs, JobHome job_home)
      : node_(std::move(node)), peer_(std::move(peer)), jobs_(jobs), service_(nullptr),
        timer_(nullptr), job_home_(std::move(job_home)) {}

 protected:
  // Fails with CheckPeerProtocol's error for another protocol version.
  kj::Promise<void> hello(HelloContext context) override;
  // Joins the rank in `jobs`; the error names the calling node.
  kj::Promise<void> joinJob(JoinJobContext context) override;
  // A Job capability (the store and barriers of `job`) for the calling node's ranks.
  kj::Promise<void> openJob(OpenJobContext context) override;
  // The node's ranks' commits and leases in one call, for ranks joined on this connection.
  kj::Promise<void> exchange(ExchangeContext context) override;

 private:
  const std::string node_;
  const PeerInfo peer_;
  JobLedger* const jobs_;
  DaemonService* const service_;
  kj::Timer* const timer_;
  const JobHome job_home_;
  std::unique_ptr<LoopLinks::Link> home_;  // job_home_'s, from the first openJob
  std::shared_ptr<Session> session_;  // the peer's memberships; made on the first openJob
  std::shared_ptr<Members> members_ = std::make_shared<Members>();
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_PEER_SERVER_H_
