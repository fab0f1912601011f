#include "daemon/coordinator/job_ledger.h"

#include <utility>

namespace ember::daemon {
namespace {

std::string JobName(const std::string& job) { return "job '" + job + "'"; }

std::string Show(const std::string& v) { return "'" + v + "'"; }
std::string Show(uint64_t v) { return std::to_string(v); }
std::string Show(bool v) { return v ? "true" : "false"; }

template <typename T>
Status CheckField(const char* field, const std::string& job, uint32_t rank, const T& has,
                  const T& asked) {
  if (has == asked) return Status::Ok();
  return InvalidArgument(std::string(field) + ": " + JobName(job) + " has " + Show(has) +
                         ", rank " + std::to_string(rank) + " asked for " + Show(asked));
}

Status CheckSameParams(const std::string& job, uint32_t rank, const JobParams& has,
                       const JobParams& asked) {
  EMBER_RETURN_IF_ERROR(CheckField("dataset", job, rank, has.dataset, asked.dataset));
  EMBER_RETURN_IF_ERROR(CheckField("num_samples", job, rank, has.num_samples, asked.num_samples));
  EMBER_RETURN_IF_ERROR(CheckField<uint64_t>("batch_size", job, rank, has.batch_size,
                                             asked.batch_size));
  EMBER_RETURN_IF_ERROR(CheckField<uint64_t>("world_size", job, rank, has.world_size,
                                             asked.world_size));
  EMBER_RETURN_IF_ERROR(CheckField("seed", job, rank, has.seed, asked.seed));
  return CheckField("shuffle", job, rank, has.shuffle, asked.shuffle);
}

}  // namespace

void JobLedger::JobState::MarkFinished(uint64_t epoch) {
  if (IsFinished(epoch)) return;
  finished_above.insert(epoch);
  while (!finished_above.empty() && *finished_above.begin() == finished_below) {
    finished_above.erase(finished_above.begin());
    ++finished_below;
  }
}

Status JobLedger::Join(const std::string& job, uint32_t rank, const JobParams& params) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it != jobs_.end()) {
    JobState& state = it->second;
    EMBER_RETURN_IF_ERROR(CheckSameParams(job, rank, state.params, params));
    if (rank >= state.params.world_size) {
      return InvalidArgument(JobName(job) + ": rank " + std::to_string(rank) +
                             " is out of range for world_size " +
                             std::to_string(state.params.world_size));
    }
    if (state.joined[rank]) {
      return AlreadyExists(JobName(job) + ": rank " + std::to_string(rank) +
                           " is already joined");
    }
    state.joined[rank] = true;
    state.ever_joined[rank] = true;
    return Status::Ok();
  }

  Result<uint64_t> per_rank =
      daemon::BatchesPerRank(params.num_samples, params.batch_size, params.world_size);
  if (!per_rank.ok()) return per_rank.status().WithContext(JobName(job));
  if (rank >= params.world_size) {
    return InvalidArgument(JobName(job) + ": rank " + std::to_string(rank) +
                           " is out of range for world_size " +
                           std::to_string(params.world_size));
  }
  JobState state;
  state.params = params;
  state.batches_per_rank = *per_rank;
  state.joined.assign(params.world_size, false);
  state.joined[rank] = true;
  state.ever_joined.assign(params.world_size, false);
  state.ever_joined[rank] = true;
  jobs_.emplace(job, std::move(state));
  return Status::Ok();
}

Result<BatchLease> JobLedger::Next(const std::string& job, uint32_t rank, uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return NotFound(JobName(job) + " does not exist");
  JobState& state = it->second;
  if (rank >= state.joined.size() || !state.joined[rank]) {
    return NotFound(JobName(job) + ": rank " + std::to_string(rank) + " is not joined");
  }
  const std::string exhausted = JobName(job) + ": rank " + std::to_string(rank) +
                                " already received all " +
                                std::to_string(state.batches_per_rank) + " batches of epoch " +
                                std::to_string(epoch);
  if (state.IsFinished(epoch)) return FailedPrecondition(exhausted);

  auto eit = state.epochs.find(epoch);
  if (eit == state.epochs.end()) {
    const JobParams& p = state.params;
    Result<EpochPlan> plan = MakeEpochPlan(p.num_samples, p.batch_size, p.world_size, p.seed,
                                           epoch, p.shuffle);
    if (!plan.ok()) {
      return plan.status().WithContext(JobName(job) + ": epoch " + std::to_string(epoch));
    }
    EpochState fresh;
    fresh.plan = std::move(plan).value();
    eit = state.epochs.emplace(epoch, std::move(fresh)).first;
    ++state.epochs_started;
  }
  EpochState& es = eit->second;

  uint64_t& leased = es.leased_by_rank[rank];
  if (leased >= state.batches_per_rank) return FailedPrecondition(exhausted);

  // Each rank holds fewer than batches_per_rank leases here, so fewer than all batches
  // are out: a returned or a fresh batch is always left.
  uint64_t batch;
  if (!es.returned.empty()) {
    batch = *es.returned.begin();
    es.returned.erase(es.returned.begin());
  } else if (es.next_fresh < es.plan.num_batches()) {
    batch = es.next_fresh++;
  } else {
    return Internal(JobName(job) + ": epoch " + std::to_string(epoch) +
                    ": no batch left although rank " + std::to_string(rank) + " has only " +
                    std::to_string(leased) + " leases");
  }

  BatchLease lease;
  lease.epoch = epoch;
  lease.batch = batch;
  lease.index_in_epoch = leased;
  lease.last_in_epoch = leased + 1 == state.batches_per_rank;
  const uint64_t* ids = es.plan.batch_ids(batch);
  lease.sample_ids.assign(ids, ids + es.plan.batch_size(batch));

  ++leased;
  es.outstanding[{rank, batch}] = false;
  ++state.batches_leased;
  return lease;
}

Status JobLedger::Commit(const std::string& job, uint32_t rank, uint64_t epoch, uint64_t batch) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return NotFound(JobName(job) + " does not exist");
  JobState& state = it->second;
  if (state.IsFinished(epoch)) return Status::Ok();

  const std::string no_lease = JobName(job) + ": rank " + std::to_string(rank) +
                               " holds no lease of batch " + std::to_string(batch) +
                               " of epoch " + std::to_string(epoch);
  auto eit = state.epochs.find(epoch);
  if (eit == state.epochs.end()) return NotFound(no_lease);
  EpochState& es = eit->second;
  auto lit = es.outstanding.find({rank, batch});
  if (lit == es.outstanding.end()) return NotFound(no_lease);
  if (lit->second) return Status::Ok();

  lit->second = true;
  ++es.committed;
  ++state.batches_committed;
  if (es.committed == es.plan.num_batches()) {
    state.epochs.erase(eit);
    state.MarkFinished(epoch);
  }
  return Status::Ok();
}

void JobLedger::Leave(const std::string& job, uint32_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  JobState& state = it->second;
  if (rank >= state.joined.size() || !state.joined[rank]) return;
  state.joined[rank] = false;

  // A rank that finished early must not take the job with it: the job is forgotten only
  // once every rank of the world has joined and all have left.
  bool anyone_left = false;
  for (bool joined : state.joined) anyone_left = anyone_left || joined;
  bool all_came = true;
  for (bool came : state.ever_joined) all_came = all_came && came;
  if (!anyone_left && all_came) {
    jobs_.erase(it);
    return;
  }

  for (auto& [epoch, es] : state.epochs) {
    auto lit = es.outstanding.lower_bound({rank, 0});
    while (lit != es.outstanding.end() && lit->first.first == rank) {
      if (lit->second) {
        ++lit;
        continue;
      }
      es.returned.insert(lit->first.second);
      --es.leased_by_rank[rank];
      lit = es.outstanding.erase(lit);
    }
  }
}

Result<uint64_t> JobLedger::BatchesPerRank(const std::string& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return NotFound(JobName(job) + " does not exist");
  return it->second.batches_per_rank;
}

std::vector<JobSummary> JobLedger::Summaries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobSummary> out;
  out.reserve(jobs_.size());
  for (const auto& [name, state] : jobs_) {
    JobSummary s;
    s.job = name;
    s.params = state.params;
    s.epochs_started = state.epochs_started;
    s.batches_leased = state.batches_leased;
    s.batches_committed = state.batches_committed;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ember::daemon
