#include "daemon/service/peer_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/coordinator/job_name.h"

namespace ember::daemon {

struct PeerMembers {
  std::map<std::string, std::set<uint32_t>> joined;               // by job
  std::map<std::pair<std::string, uint32_t>, Status> refused;     // (job, rank) -> why
};

PeerRank::PeerRank(JobLedger& ledger, std::string job, uint32_t rank, std::string node,
                   std::shared_ptr<PeerMembers> members)
    : ledger_(ledger), job_(std::move(job)), rank_(rank), node_(std::move(node)),
      members_(std::move(members)) {
  members_->joined[job_].insert(rank_);
  members_->refused.erase({job_, rank_});
}

PeerRank::~PeerRank() {
  auto it = members_->joined.find(job_);
  if (it != members_->joined.end() && it->second.erase(rank_) == 1 && it->second.empty())
    members_->joined.erase(it);
  ledger_.Leave(job_, rank_);
  spdlog::info("{} (node '{}') left", RankName(job_, rank_), node_);
}

Result<BatchLease> PeerRank::Next(uint64_t epoch) {
  // The batched form: positions only, so this never waits for an epoch's order.
  std::vector<Result<BatchLease>> leases = ledger_.Next(job_, {RankWant{rank_, epoch}});
  return std::move(leases[0]);
}

Status PeerRank::Commit(uint64_t epoch, uint64_t batch) {
  return ledger_.Commit(job_, rank_, epoch, batch);
}

PeerSession::PeerSession(PeerService& service, std::string address)
    : service_(service), address_(std::move(address)),
      members_(std::make_shared<PeerMembers>()) {}

Status PeerSession::NoJobs() const {
  return FailedPrecondition("node '" + service_.node() + "' coordinates no jobs");
}

size_t PeerSession::num_ranks() const {
  size_t n = 0;
  for (const auto& [job, ranks] : members_->joined) n += ranks.size();
  return n;
}

Principal PeerService::Claimed(const std::string& node, Principal reported) const {
  if (reported.privileged && deps_.trusted_for_root.count(node) == 0) reported.privileged = false;
  return reported;
}

void PeerService::Decode(const std::string& node, DecodeRequest request,
                         DecodeLender::Done done, std::vector<uint8_t> buffer) const {
  if (deps_.lender == nullptr)
    return done(FailedPrecondition("node '" + deps_.node +
                                   "' does not lend its decode pool (config lend_decode)"));
  request.caller = Claimed(node, request.caller);
  deps_.lender->Decode(std::move(request), std::move(done), std::move(buffer));
}

Result<std::unique_ptr<PeerRank>> PeerSession::Join(const PeerJoin& join) {
  JobLedger* ledger = service_.deps().ledger;
  if (ledger == nullptr) return NoJobs();
  JobParams params = join.params;
  params.owner = service_.Claimed(join.node, params.owner);
  Status joined = ledger->Join(join.job, join.rank, params, join.held);
  if (!joined.ok()) {
    Status named = joined.WithContext("node '" + join.node + "'");
    spdlog::warn("peer {}: {}", address_, named.message());
    auto& refused = members_->refused;
    if (refused.size() >= PeerService::kMaxRefusals && refused.count({join.job, join.rank}) == 0)
      refused.erase(refused.begin());
    refused[{join.job, join.rank}] = named;
    return named;
  }
  ledger->SetRankNode(join.job, join.rank, join.node);
  if (!join.held.empty())
    spdlog::info("{} (node '{}') resumed with {} batches it holds", RankName(join.job, join.rank),
                 join.node, join.held.size());
  spdlog::info("{} joined from node '{}' ({})", RankName(join.job, join.rank), join.node,
               address_);
  return std::unique_ptr<PeerRank>(
      new PeerRank(*ledger, join.job, join.rank, join.node, members_));
}

Result<ExchangeAnswer> PeerSession::Exchange(const std::string& job,
                                             const std::vector<RankBatch>& commits,
                                             const std::vector<RankWant>& wants) {
  JobLedger* ledger = service_.deps().ledger;
  if (ledger == nullptr) return NoJobs();
  static const std::set<uint32_t> kNone;
  auto found = members_->joined.find(job);
  const std::set<uint32_t>& mine = found == members_->joined.end() ? kNone : found->second;
  const size_t limit = PeerService::kExchangeEntriesPerRank * std::max<size_t>(1, mine.size());
  if (commits.size() > limit || wants.size() > limit)
    return InvalidArgument("exchange for job '" + job + "': " + std::to_string(commits.size()) +
                           " commits and " + std::to_string(wants.size()) + " wants for " +
                           std::to_string(mine.size()) +
                           " ranks joined through this connection (at most " +
                           std::to_string(PeerService::kExchangeEntriesPerRank) +
                           " each per rank)");
  // A rank whose join was refused gets the refusal; other strangers, not_found.
  auto not_member = [&](uint32_t rank) {
    auto refused = members_->refused.find({job, rank});
    if (refused != members_->refused.end()) return refused->second;
    return NotFound(RankName(job, rank) + " is not joined through this connection");
  };

  ExchangeAnswer answer;
  std::vector<RankBatch> known;
  known.reserve(commits.size());
  for (const RankBatch& c : commits) {
    if (mine.count(c.rank) == 0)
      answer.commit_errors.push_back(not_member(c.rank));
    else
      known.push_back(c);
  }
  for (Status& s : ledger->Commit(job, known))
    if (!s.ok()) answer.commit_errors.push_back(std::move(s));

  std::vector<RankWant> asked;
  asked.reserve(wants.size());
  for (const RankWant& w : wants)
    if (mine.count(w.rank) != 0) asked.push_back(w);
  std::vector<Result<BatchLease>> leases = ledger->Next(job, asked);
  answer.leases.reserve(wants.size());
  size_t next_lease = 0;
  for (const RankWant& w : wants) {
    if (mine.count(w.rank) == 0)
      answer.leases.push_back(not_member(w.rank));
    else
      answer.leases.push_back(std::move(leases[next_lease++]));
  }
  return answer;
}

Result<JobMembership*> PeerSession::OpenJob(const std::string& job, const std::string& node,
                                            const Principal& caller) {
  DaemonService* stores = service_.deps().service;
  if (stores == nullptr) return NoJobs();
  if (!stores_) stores_ = std::make_shared<Session>(*stores, PeerCredentials{}, AccessPolicy::Peer());
  EMBER_ASSIGN_OR_RETURN(JobMembership * membership,
                         stores_->JoinJobAs(job, service_.Claimed(node, caller)));
  spdlog::info("job '{}': store opened for node '{}' ({})", job, node, address_);
  return membership;
}

}  // namespace ember::daemon
