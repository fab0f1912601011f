#include "daemon/rpc/peer_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/rpc_status.h"
#include "daemon/rpc/daemon_server.h"
#include "daemon/rpc/peer_protocol.h"

namespace ember::daemon {
namespace {

JobParams FromRpc(rpc::JobParams::Reader r) {
  JobParams p;
  p.dataset = r.getDataset();
  p.num_samples = r.getNumSamples();
  p.batch_size = r.getBatchSize();
  p.world_size = r.getWorldSize();
  p.seed = r.getSeed();
  p.shuffle = r.getShuffle();
  p.start_epoch = r.getStartEpoch();
  p.start_position = r.getStartPosition();
  p.fingerprint = r.getFingerprint();
  p.owner.uid = r.getOwnerUid();
  p.owner.team = r.getOwnerTeam();
  p.owner.privileged = r.getOwnerPrivileged();
  return p;
}

void ToRpc(const BatchLease& lease, rpc::BatchLease::Builder b) {
  b.setEpoch(lease.epoch);
  b.setBatch(lease.batch);
  b.setLastInEpoch(lease.last_in_epoch);
  b.setStepEnd(lease.step_end);
  b.setBegin(lease.positions.begin);
  b.setEnd(lease.positions.end);
}

using rpc_status::Throw;
using rpc_status::ValueOrThrow;

// One rank of another node in a job this daemon coordinates; leaves the job when released.
class CoordinationServer final : public rpc::Coordination::Server {
 public:
  CoordinationServer(JobLedger& jobs, std::string job, uint32_t rank, std::string node,
                     std::shared_ptr<PeerServer::Members> members)
      : jobs_(jobs), job_(std::move(job)), rank_(rank), node_(std::move(node)),
        members_(std::move(members)) {
    members_->joined[job_].insert(rank_);
    members_->refused.erase({job_, rank_});
  }
  ~CoordinationServer() {
    auto it = members_->joined.find(job_);
    if (it != members_->joined.end() && it->second.erase(rank_) == 1 && it->second.empty())
      members_->joined.erase(it);
    jobs_.Leave(job_, rank_);
    spdlog::info("job '{}' rank {} (node '{}') left", job_, rank_, node_);
  }

 protected:
  kj::Promise<void> next(NextContext context) override {
    // The batched form: positions only, so this never waits for an epoch's order.
    std::vector<Result<BatchLease>> leases =
        jobs_.Next(job_, {RankWant{rank_, context.getParams().getEpoch()}});
    ToRpc(ValueOrThrow(std::move(leases[0])), context.getResults().initLease());
    return kj::READY_NOW;
  }
  kj::Promise<void> commit(CommitContext context) override {
    const auto p = context.getParams();
    Status committed = jobs_.Commit(job_, rank_, p.getEpoch(), p.getBatch());
    if (!committed.ok()) Throw(committed);
    return kj::READY_NOW;
  }

 private:
  JobLedger& jobs_;
  const std::string job_;
  const uint32_t rank_;
  const std::string node_;
  const std::shared_ptr<PeerServer::Members> members_;
};

// Entries a node may send per rank it has joined through the connection, in each list
// of one exchange: a few steps of lookahead, and a bound on what one call can ask.
constexpr size_t kExchangeEntriesPerRank = 8;

}  // namespace

kj::Promise<void> PeerServer::hello(HelloContext context) {
  const auto params = context.getParams();
  const std::string node = params.getNode();
  Status protocol = CheckPeerProtocol(node, params.getProtocol());
  if (!protocol.ok()) {
    spdlog::warn("peer {}: {}", peer_.address, protocol.message());
    Throw(protocol);
  }
  spdlog::info("peer {} is node '{}' (certificate CN '{}')", peer_.address, node,
               peer_.common_name);
  auto results = context.getResults();
  results.setNode(node_);
  results.setProtocol(kPeerProtocol);
  return kj::READY_NOW;
}

kj::Promise<void> PeerServer::joinJob(JoinJobContext context) {
  const auto p = context.getParams();
  const std::string job = p.getJob(), node = p.getNode();
  const uint32_t rank = p.getRank();
  if (jobs_ == nullptr)
    Throw(FailedPrecondition("node '" + node_ + "' coordinates no jobs"));
  std::vector<HeldBatch> held;
  for (auto h : p.getHeld()) held.push_back({h.getEpoch(), h.getBatch(), h.getConsumed()});
  Status joined = jobs_->Join(job, rank, FromRpc(p.getParams()), held);
  if (joined.ok()) jobs_->SetRankNode(job, rank, node);
  if (joined.ok() && !held.empty())
    spdlog::info("job '{}' rank {} (node '{}') resumed with {} batches it holds", job, rank,
                 node, held.size());
  if (!joined.ok()) {
    Status named = joined.WithContext("node '" + node + "'");
    spdlog::warn("peer {}: {}", peer_.address, named.message());
    if (members_->refused.size() >= Members::kMaxRefusals)
      members_->refused.erase(members_->refused.begin());
    members_->refused[{job, rank}] = named;
    Throw(named);
  }
  spdlog::info("job '{}' rank {} joined from node '{}' ({})", job, rank, node, peer_.address);
  context.getResults().setCoordination(
      kj::heap<CoordinationServer>(*jobs_, job, rank, node, members_));
  return kj::READY_NOW;
}

kj::Promise<void> PeerServer::openJob(OpenJobContext context) {
  const auto p = context.getParams();
  if (job_home_) {
    if (home_ == nullptr) home_ = job_home_();
    auto forwarded = home_->capability().castAs<rpc::Peer>().openJobRequest();
    forwarded.setJob(p.getJob());
    forwarded.setNode(p.getNode());
    if (p.hasCaller()) forwarded.setCaller(p.getCaller());
    return context.tailCall(kj::mv(forwarded));
  }
  if (service_ == nullptr || timer_ == nullptr)
    Throw(FailedPrecondition("node '" + node_ + "' coordinates no jobs"));
  if (!session_) session_ = std::make_shared<Session>(*service_, PeerCredentials{}, AccessPolicy::Peer());
  Principal caller;  // absent (an older peer): unknown, owning nothing
  if (p.hasCaller()) {
    caller.uid = p.getCaller().getUid();
    caller.team = p.getCaller().getTeam();
    caller.privileged = p.getCaller().getPrivileged();
  }
  JobMembership* membership = ValueOrThrow(session_->JoinJobAs(p.getJob(), caller));
  spdlog::info("job '{}': store opened for node '{}' ({})", std::string(p.getJob()),
               std::string(p.getNode()), peer_.address);
  context.getResults().setJob(
      kj::heap<JobServer>(session_, membership, *timer_, /*node_local=*/false));
  return kj::READY_NOW;
}

kj::Promise<void> PeerServer::exchange(ExchangeContext context) {
  const auto p = context.getParams();
  const std::string job = p.getJob();
  if (jobs_ == nullptr) Throw(FailedPrecondition("node '" + node_ + "' coordinates no jobs"));
  static const std::set<uint32_t> kNone;
  auto found = members_->joined.find(job);
  const std::set<uint32_t>& mine = found == members_->joined.end() ? kNone : found->second;
  const size_t limit = kExchangeEntriesPerRank * std::max<size_t>(1, mine.size());
  if (p.getCommits().size() > limit || p.getWants().size() > limit)
    Throw(InvalidArgument("exchange for job '" + job + "': " +
                          std::to_string(p.getCommits().size()) + " commits and " +
                          std::to_string(p.getWants().size()) + " wants for " +
                          std::to_string(mine.size()) +
                          " ranks joined through this connection (at most " +
                          std::to_string(kExchangeEntriesPerRank) + " each per rank)"));
  // A rank whose join was refused gets the refusal; other strangers, not_found.
  auto not_member = [&](uint32_t rank) {
    auto refused = members_->refused.find({job, rank});
    if (refused != members_->refused.end()) return refused->second;
    return NotFound("job '" + job + "': rank " + std::to_string(rank) +
                    " is not joined through this connection");
  };

  std::vector<std::string> commit_errors;
  std::vector<RankBatch> commits;
  commits.reserve(p.getCommits().size());
  for (auto c : p.getCommits()) {
    if (mine.count(c.getRank()) == 0) {
      commit_errors.push_back(not_member(c.getRank()).ToString());
      continue;
    }
    commits.push_back({c.getRank(), c.getEpoch(), c.getBatch()});
  }
  for (const Status& s : jobs_->Commit(job, commits))
    if (!s.ok()) commit_errors.push_back(s.ToString());

  std::vector<RankWant> wants;
  wants.reserve(p.getWants().size());
  for (auto w : p.getWants())
    if (mine.count(w.getRank()) != 0) wants.push_back({w.getRank(), w.getEpoch()});
  std::vector<Result<BatchLease>> leases = jobs_->Next(job, wants);

  auto results = context.getResults().initResults(p.getWants().size());
  size_t next_lease = 0;
  for (size_t i = 0; i < p.getWants().size(); ++i) {
    const uint32_t rank = p.getWants()[i].getRank();
    results[i].setRank(rank);
    if (mine.count(rank) == 0) {
      results[i].setError(not_member(rank).ToString());
      continue;
    }
    const Result<BatchLease>& lease = leases[next_lease++];
    if (lease.ok())
      ToRpc(*lease, results[i].initLease());
    else
      results[i].setError(lease.status().ToString());
  }
  auto errors = context.getResults().initCommitErrors(commit_errors.size());
  for (size_t i = 0; i < commit_errors.size(); ++i) errors.set(i, commit_errors[i]);
  return kj::READY_NOW;
}

}  // namespace ember::daemon
