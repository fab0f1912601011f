// RemoteCoordinator: the JobCoordinator of jobs that another node's daemon coordinates,
// proxied over a CoordinatorChannel to it (daemon/rpc/peer_channel: Cap'n Proto over
// mutual TLS). The local streams of such a job lease their batches through it; the
// coordinating daemon's JobLedger decides, so exactly-once holds across nodes.
//
// Calls map to a membership per rank (Peer.joinJob) and exchanges, which carry the
// commits and lease requests of all this node's ranks of a job together: a call waits
// options.batch_linger for the other ranks' calls, and calls made while an exchange is in
// flight go in the next one. So the coordinator's work, the traffic and the journal grow
// with nodes, not ranks.
//   Join    checks the plan locally (so the ring can be sized at once) and joins without
//           waiting: a refusal (params unlike the job's, another dataset copy) comes back
//           from the rank's first Next, naming the node.
//   Next    waits for the coordinator's answer, at most options.call_timeout, and looks up
//           the lease's sample ids (it names positions of the epoch's order) in this
//           node's EpochOrders, on the calling thread. When the
//           coordinator cannot be reached (it restarted, the network dropped) it retries
//           with backoff for up to options.reconnect_timeout: it reconnects and joins
//           the rank again, reporting the batches the rank consumed or holds (of its last
//           two epochs), so the coordinator's ledger (replayed from its journal) continues
//           exactly where the rank stands. Past the deadline: kUnavailable, naming it.
//   Commit  queued for the next exchange without waiting; a failure is logged. A commit
//           lost with a dropped connection is reported when the rank joins again.
//   Leave   ends the rank's membership: the coordinator drops its leases.
// The channel connects on the first Join and again on a Join after its connection
// dropped; ranks whose connection dropped fail their next Next with kUnavailable.
//
// Thread-safety: Join, Commit, Leave and BatchesPerRank may be called from any thread,
// including the event loop's; Next blocks and must not be called on the event loop's
// thread (kInternal). Create the object on the event loop's thread (the channel's) and
// call Shutdown() there before the loop goes away; after that, Next fails kUnavailable and
// the object may be destroyed on any thread once no stream uses it.
#ifndef EMBER_DAEMON_COORDINATOR_REMOTE_COORDINATOR_H_
#define EMBER_DAEMON_COORDINATOR_REMOTE_COORDINATOR_H_

#include <kj/async.h>
#include <kj/timer.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/rpc_status.h"
#include "daemon/coordinator/coordinator_channel.h"
#include "daemon/coordinator/epoch_orders.h"
#include "daemon/coordinator/job_coordinator.h"
#include "daemon/coordinator/job_ledger.h"

namespace ember::daemon {

struct RemoteCoordinatorOptions {
  std::string node;                          // this daemon's node name, for messages
  kj::Duration call_timeout = 30 * kj::SECONDS;
  // How long a rank's Next or Commit waits for the node's other ranks before the exchange
  // goes out (a stream asks well ahead of its trainer, so this costs no training time).
  kj::Duration batch_linger = 1 * kj::MILLISECONDS;
  std::chrono::milliseconds reconnect_timeout{60000};
};

class RemoteCoordinator final : public JobCoordinator {
 public:
  // `address`: the coordinating daemon's, for messages. `timer` (the event loop's) and
  // `channel` must outlive the object.
  RemoteCoordinator(kj::Timer& timer, CoordinatorChannel& channel, std::string address,
                    RemoteCoordinatorOptions options);
  ~RemoteCoordinator() noexcept override;

  // Ends every rank's membership, drops the channel's connection and logs the coordination
  // traffic (traffic()). Event loop's thread only; idempotent.
  void Shutdown();

  // What this daemon sent the coordinator over all its connections so far.
  struct Traffic {
    uint64_t joins = 0;       // memberships (Peer.joinJob)
    uint64_t exchanges = 0;   // Peer.exchange
    uint64_t leases = 0;      // leases received
    uint64_t commits = 0;     // commits sent
    ChannelTraffic channel;   // connections, stores opened, bytes (the channel's count)
  };
  // Event loop's thread only.
  Traffic traffic() const;

  // The jobs this daemon's ranks are in through this coordinator, with only those ranks
  // (their epoch, consumed and leased batches as this proxy saw them) and `coordinator`
  // set to address(); only the jobs whose owner `include` takes (empty: all). Event loop's
  // thread only.
  std::vector<JobSummary> Summaries(const OwnerFilter& include = {}) const;

  const std::string& address() const { return address_; }

  Status Join(const std::string& job, uint32_t rank, const JobParams& params,
              const std::vector<HeldBatch>& held = {}) override;
  Result<BatchLease> Next(const std::string& job, uint32_t rank, uint64_t epoch) override;
  Status Commit(const std::string& job, uint32_t rank, uint64_t epoch, uint64_t batch) override;
  void Leave(const std::string& job, uint32_t rank) override;
  Result<uint64_t> BatchesPerRank(const std::string& job) const override;
  bool remote() const override { return true; }

 private:
  // Runs `f` (returning void) on the event loop's thread, at once when called there; false
  // if the loop is gone.
  template <typename F>
  bool OnLoop(F&& f);
  struct RankState {
    JobParams params;
    std::unique_ptr<CoordinatorChannel::Membership> membership;
    uint64_t generation = 0;  // the channel's connection it joined on
    // Epoch -> batch -> consumed, of its last two epochs (what a join again reports).
    std::map<uint64_t, std::map<uint64_t, bool>> held;
    uint64_t leases = 0;   // received, over its membership
    uint64_t commits = 0;  // sent
    bool rejoining = false;  // joined again (with `held`), no answer from it yet
  };
  // A rank's Next waiting for an exchange.
  struct Want {
    uint32_t rank = 0;
    uint64_t epoch = 0;
    kj::Own<kj::PromiseFulfiller<Result<BatchLease>>> answer;
  };
  // One job's calls waiting for an exchange. Loop only.
  struct Outbox {
    std::vector<RankBatch> commits;
    std::vector<Want> wants;
    bool scheduled = false;  // a flush is due after batch_linger
    bool in_flight = false;  // an exchange is out; what comes meanwhile waits for it
  };
  // Joins the rank on the channel's connection (with what it holds when `again`). Loop only.
  void SendJoin(const std::string& job, uint32_t rank, RankState& state, bool again);
  // Sends the job's queued calls after batch_linger, unless an exchange is in flight
  // (then they go when it returns). Loop only.
  void Schedule(const std::string& job);
  // Sends the job's queued calls in one exchange now. Loop only.
  void Flush(const std::string& job);
  // Answers `want` from an exchange's entry or failure. Loop only.
  void Answer(const std::string& job, Want& want, Result<BatchLease> lease);
  Result<BatchLease> NextOnLoop(const std::string& job, uint32_t rank, uint64_t epoch,
                                const std::string& context);

  kj::Timer& timer_;
  CoordinatorChannel& channel_;
  const std::string address_;
  const RemoteCoordinatorOptions options_;
  kj::Own<const kj::Executor> executor_;
  bool shut_down_ = false;  // loop thread only
  const std::thread::id loop_thread_;

  // Loop-thread state.
  std::unique_ptr<rpc_status::ReportFailures> error_log_;
  kj::Own<kj::TaskSet> tasks_;
  std::map<std::pair<std::string, uint32_t>, RankState> ranks_;
  std::map<std::string, Outbox> outboxes_;  // by job
  Traffic traffic_;  // but its channel's, which the channel counts

  // The order of the job's epochs, for the sample ids of its leases (which carry
  // positions); {} when the job is unknown.
  OrderKey OrderKeyOf(const std::string& job) const;

  mutable Mutex mu_;
  std::map<std::string, uint64_t> batches_per_rank_ GUARDED_BY(mu_);  // by job
  std::map<std::string, OrderKey> order_keys_ GUARDED_BY(mu_);        // by job
  EpochOrders orders_;  // built on the streams' threads and in its own, never the loop's
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_REMOTE_COORDINATOR_H_
