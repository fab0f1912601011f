// PeerService: the daemon-to-daemon operations (schemas/peer.capnp) without a transport,
// as DaemonService is for trainers; daemon/rpc/peer_server.cc only translates.
//
// Glossary
//   peer session  what one connection of another node's daemon owns (a PeerSession): the
//                 ranks joined through it and why the latest join of each refused rank
//                 was refused. Its ranks leave their jobs when their PeerRank goes (the
//                 connection ended, or the node released the rank).
//   exchange      the calling node's commits and lease requests for its ranks of one job,
//                 in one call (so coordinator work grows with nodes, not ranks).
//
// Thread-safety: a PeerSession and its PeerRanks live on the thread of the event loop
// serving the connection (any peer loop; the JobLedger is thread-safe). OpenJob uses the
// DaemonService, so it runs only on the main loop's thread (where the stores are): the
// shell forwards it there.
#ifndef EMBER_DAEMON_SERVICE_PEER_SERVICE_H_
#define EMBER_DAEMON_SERVICE_PEER_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/access/principal.h"
#include "daemon/coordinator/coordinator_channel.h"
#include "daemon/coordinator/job_coordinator.h"
#include "daemon/coordinator/job_ledger.h"
#include "daemon/decode/decode_lender.h"
#include "daemon/decode/decode_request.h"
#include "daemon/service/daemon_service.h"
#include "daemon/service/session.h"
#include "ember/status.h"

namespace ember::daemon {

// A join (PeerJoin) and an exchange's answer (ExchangeAnswer) are the coordinator
// channel's (daemon/coordinator/coordinator_channel.h): what one node's side sends is
// what the other's serves.

// The peer side's shared parts; none owned, all must outlive the service and its sessions.
struct PeerServiceDeps {
  std::string node;                  // this daemon's node name (config key `node`)
  JobLedger* ledger = nullptr;       // null: this daemon coordinates no jobs
  DaemonService* service = nullptr;  // the stores (OpenJob); null: not on this thread
  std::set<std::string> trusted_for_root;  // config trust_root_from
  DecodeLender* lender = nullptr;    // other nodes' decoding; null: config lend_decode off
};

class PeerService {
 public:
  // Entries a node may send per rank it joined through the connection, in each list of
  // one exchange: a few steps of lookahead, and a bound on what one call can ask.
  static constexpr size_t kExchangeEntriesPerRank = 8;
  // Refusals a session remembers (the oldest is forgotten first).
  static constexpr size_t kMaxRefusals = 1024;

  explicit PeerService(PeerServiceDeps deps) : deps_(std::move(deps)) {}
  const std::string& node() const { return deps_.node; }
  // Who a caller that node `node` reports is here: its principal, privileged only if the
  // node is trusted for root (config trust_root_from).
  Principal Claimed(const std::string& node, Principal reported) const;
  const PeerServiceDeps& deps() const { return deps_; }

  // A decode rows stream's request: decodes `request` for a stream of node `node` (its
  // caller as Claimed) with the lender, into `buffer` (DecodeLender::Decode), answering
  // through `done` as DecodeLender::Decode does (any thread; at once for a refusal).
  // kFailedPrecondition without a lender (config lend_decode off). Thread-safe.
  void Decode(const std::string& node, DecodeRequest request, DecodeLender::Done done,
              std::vector<uint8_t> buffer = {}) const;

 private:
  const PeerServiceDeps deps_;
};

class PeerSession;
struct PeerMembers;  // a session's ranks and refusals (peer_service.cc)

// One rank of another node joined through a peer session; leaves the job when destroyed.
// May outlive its session (it keeps what it needs).
class PeerRank {
 public:
  ~PeerRank();
  PeerRank(const PeerRank&) = delete;
  PeerRank& operator=(const PeerRank&) = delete;

  // Coordination.next and commit, for this rank. Next's lease carries positions only (the
  // node looks up its sample ids), so it never waits for an epoch's order.
  Result<BatchLease> Next(uint64_t epoch);
  Status Commit(uint64_t epoch, uint64_t batch);

 private:
  friend class PeerSession;
  PeerRank(JobLedger& ledger, std::string job, uint32_t rank, std::string node,
           std::shared_ptr<PeerMembers> members);

  JobLedger& ledger_;
  const std::string job_;
  const uint32_t rank_;
  const std::string node_;
  const std::shared_ptr<PeerMembers> members_;
};

class PeerSession {
 public:
  // `address`: who connected (for log lines). `service` must outlive the session.
  PeerSession(PeerService& service, std::string address);
  PeerSession(const PeerSession&) = delete;
  PeerSession& operator=(const PeerSession&) = delete;

  // Joins the rank in the ledger (JobLedger::Join with `held`); the rank is a member of
  // this session until the PeerRank is destroyed. A refusal names the calling node and is
  // remembered: it answers the rank's exchange entries. kFailedPrecondition when this
  // daemon coordinates no jobs.
  Result<std::unique_ptr<PeerRank>> Join(const PeerJoin& join);

  // Commits first, then wants, each in order, for ranks joined through this session; a
  // rank whose join was refused gets that refusal, other strangers kNotFound.
  // kInvalidArgument (naming the counts) when either list holds more than
  // kExchangeEntriesPerRank per rank joined (at least that many); kFailedPrecondition when
  // this daemon coordinates no jobs.
  Result<ExchangeAnswer> Exchange(const std::string& job, const std::vector<RankBatch>& commits,
                                  const std::vector<RankWant>& wants);

  // A membership in `job`'s store and barriers for `node`'s ranks, as `caller` (how that
  // node identified the rank's trainer); owned by StoreSession() until it ends with this
  // session. kFailedPrecondition without PeerServiceDeps::service. Main loop only.
  Result<JobMembership*> OpenJob(const std::string& job, const std::string& node,
                                 const Principal& caller);
  // The DaemonService session holding the memberships OpenJob made; null before the first.
  const std::shared_ptr<Session>& StoreSession() const { return stores_; }

  // Ranks joined through this session now, by job.
  size_t num_ranks() const;

  // kFailedPrecondition: this daemon (its node named) coordinates no jobs.
  Status NoJobs() const;

 private:
  PeerService& service_;
  const std::string address_;
  std::shared_ptr<PeerMembers> members_;
  std::shared_ptr<Session> stores_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVICE_PEER_SERVICE_H_
