// RemoteCoordinator: the JobCoordinator of jobs that another node's daemon coordinates,
// proxied over that daemon's Peer endpoint (schemas/peer.capnp, mutual TLS through
// daemon/peer). The local streams of such a job lease their batches through it; the
// coordinating daemon's JobLedger decides, so exactly-once holds across nodes.
//
// Calls map to Peer.joinJob and the rank's Coordination capability:
//   Join    checks the plan locally (so the ring can be sized at once) and sends joinJob
//           without waiting: a refusal (params unlike the job's, another dataset copy)
//           comes back from the rank's first Next, naming the node.
//   Next    waits for the coordinator's answer, at most options.call_timeout. When the
//           coordinator cannot be reached (it restarted, the network dropped) it retries
//           with backoff for up to options.reconnect_timeout: it reconnects and joins
//           the rank again, reporting the batches the rank consumed or holds (of its last
//           two epochs), so the coordinator's ledger (replayed from its journal) continues
//           exactly where the rank stands. Past the deadline: kUnavailable, naming it.
//   Commit  sent without waiting (in order with the rank's other calls); a failure is
//           logged. A commit lost with a dropped connection is served again.
//   Leave   releases the rank's Coordination capability: the coordinator drops its leases.
// The connection is opened on the first Join and reopened on a Join after it dropped;
// ranks whose connection dropped fail their next Next with kUnavailable.
//
// Thread-safety: Join, Commit, Leave and BatchesPerRank may be called from any thread,
// including the event loop's; Next blocks and must not be called on the event loop's
// thread (kInternal). Create the object on the event loop's thread and call Shutdown()
// there before the loop goes away; after that, Next fails kUnavailable and the object may
// be destroyed on any thread once no stream uses it.
#ifndef EMBER_DAEMON_RPC_REMOTE_COORDINATOR_H_
#define EMBER_DAEMON_RPC_REMOTE_COORDINATOR_H_

#include <kj/async-io.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "daemon/coordinator/job_coordinator.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/peer_tls.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {

struct RemoteCoordinatorOptions {
  std::string node;                          // this daemon's node name, for messages
  kj::Duration call_timeout = 30 * kj::SECONDS;
  std::chrono::milliseconds reconnect_timeout{60000};
  PeerConnectOptions connect;
};

class RemoteCoordinator final : public JobCoordinator {
 public:
  // `address`: the coordinating daemon's HOST:PORT. `tls` null: plain TCP (tls: off).
  // `io` and `tls` must outlive the object.
  RemoteCoordinator(kj::AsyncIoContext& io, PeerTls* tls, std::string address,
                    RemoteCoordinatorOptions options);
  ~RemoteCoordinator() noexcept override;

  // Drops the connection and every rank's membership. Event loop's thread only; idempotent.
  void Shutdown();

  const std::string& address() const { return address_; }

  Status Join(const std::string& job, uint32_t rank, const JobParams& params,
              const std::vector<HeldBatch>& held = {}) override;
  Result<BatchLease> Next(const std::string& job, uint32_t rank, uint64_t epoch) override;
  Status Commit(const std::string& job, uint32_t rank, uint64_t epoch, uint64_t batch) override;
  void Leave(const std::string& job, uint32_t rank) override;
  Result<uint64_t> BatchesPerRank(const std::string& job) const override;

  // The store and barriers of `job` at the coordinator (Peer.openJob), pipelined: calls on
  // it wait for the connection. Event loop's thread only.
  rpc::Job::Client OpenJob(const std::string& job);

 private:
  class ErrorLog;
  // Runs `f` (returning void) on the event loop's thread, at once when called there; false
  // if the loop is gone.
  template <typename F>
  bool OnLoop(F&& f);
  // The coordinator's Peer capability; connects if there is no live connection. Loop only.
  rpc::Peer::Client Peer();
  struct RankState {
    JobParams params;
    kj::Maybe<rpc::Coordination::Client> coordination;
    std::map<uint64_t, std::map<uint64_t, bool>> held;  // epoch -> batch -> consumed
    bool rejoining = false;  // joined again (with `held`), no answer from it yet
  };
  // Sends joinJob for the rank (with what it holds when `again`). Loop only.
  void SendJoin(const std::string& job, uint32_t rank, RankState& state, bool again);
  Result<BatchLease> NextOnLoop(const std::string& job, uint32_t rank, uint64_t epoch,
                                const std::string& context);

  kj::AsyncIoContext& io_;
  PeerTls* const tls_;
  const std::string address_;
  const RemoteCoordinatorOptions options_;
  kj::Own<const kj::Executor> executor_;
  bool shut_down_ = false;  // loop thread only
  const std::thread::id loop_thread_;

  // Loop-thread state.
  std::unique_ptr<ErrorLog> error_log_;
  kj::Own<kj::TaskSet> tasks_;
  std::unique_ptr<PeerConnection> connection_;
  kj::Maybe<rpc::Peer::Client> peer_;
  uint64_t connection_generation_ = 0;
  std::map<std::pair<std::string, uint32_t>, RankState> ranks_;

  mutable std::mutex mu_;
  std::map<std::string, uint64_t> batches_per_rank_;  // by job; guarded by mu_
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_REMOTE_COORDINATOR_H_
