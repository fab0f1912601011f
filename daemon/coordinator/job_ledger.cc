#include "daemon/coordinator/job_ledger.h"

#include <algorithm>
#include <utility>

#include "daemon/catalog/fingerprint.h"
#include "daemon/coordinator/job_name.h"

namespace ember::daemon {
namespace {

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

// The params that must match between ranks, other than the start.
Status CheckSameJob(const std::string& job, uint32_t rank, const JobParams& has,
                    const JobParams& asked) {
  EMBER_RETURN_IF_ERROR(CheckField("dataset", job, rank, has.dataset, asked.dataset));
  EMBER_RETURN_IF_ERROR(CheckField("num_samples", job, rank, has.num_samples, asked.num_samples));
  EMBER_RETURN_IF_ERROR(CheckField<uint64_t>("batch_size", job, rank, has.batch_size,
                                             asked.batch_size));
  EMBER_RETURN_IF_ERROR(CheckField<uint64_t>("world_size", job, rank, has.world_size,
                                             asked.world_size));
  EMBER_RETURN_IF_ERROR(CheckField("seed", job, rank, has.seed, asked.seed));
  if (has.fingerprint != 0 && asked.fingerprint != 0)
    EMBER_RETURN_IF_ERROR(CheckField("dataset fingerprint", job, rank,
                                     FingerprintHex(has.fingerprint),
                                     FingerprintHex(asked.fingerprint)));
  EMBER_RETURN_IF_ERROR(CheckField("shuffle shards", job, rank,
                                   has.shuffle_shape.by_shards() ? FingerprintHex(has.shuffle_shape.digest) : "none",
                                   asked.shuffle_shape.by_shards() ? FingerprintHex(asked.shuffle_shape.digest) : "none"));
  EMBER_RETURN_IF_ERROR(CheckField<uint64_t>("shuffle window", job, rank,
                                             has.shuffle_shape.window,
                                             asked.shuffle_shape.window));
  return CheckField("shuffle", job, rank, has.shuffle, asked.shuffle);
}

Status CheckSameStart(const std::string& job, uint32_t rank, const JobParams& has,
                      const JobParams& asked) {
  EMBER_RETURN_IF_ERROR(
      CheckField("start_epoch", job, rank, has.start_epoch, asked.start_epoch));
  return CheckField("start_position", job, rank, has.start_position, asked.start_position);
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

Result<JobLedger::JobState> JobLedger::NewJob(const std::string& job, const JobParams& params) {
  Result<StepLayout> full = MakeStepLayout(params.num_samples, params.batch_size, params.world_size);
  if (!full.ok()) return full.status().WithContext(JobName(job));
  if (params.start_position != 0) {
    Result<StepLayout> first = MakeStepLayout(params.num_samples, params.batch_size,
                                              params.world_size, params.start_position);
    if (!first.ok())
      return first.status().WithContext(JobName(job) + ": epoch " +
                                        std::to_string(params.start_epoch));
  }
  JobState state;
  state.params = params;
  state.batches_per_rank = full->steps();
  state.joined.assign(params.world_size, false);
  state.ever_joined.assign(params.world_size, false);
  state.finished_below = params.start_epoch;
  return state;
}

Status JobLedger::Join(const std::string& job, uint32_t rank, const JobParams& params,
                       const std::vector<HeldBatch>& held) {
  EMBER_RETURN_IF_ERROR(JoinOnly(job, rank, params));
  if (held.empty()) return Status::Ok();
  Status resumed = Resume(job, rank, held);
  if (!resumed.ok()) Leave(job, rank);
  return resumed;
}

Status JobLedger::JoinOnly(const std::string& job, uint32_t rank, const JobParams& params) {
  EMBER_RETURN_IF_ERROR(CheckJobName(job, kMaxJobKeyBytes));
  MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  // A job kept from before (ReplayJob) keeps its world under a lower limit.
  if (it == jobs_.end() || it->second.params.world_size != params.world_size)
    EMBER_RETURN_IF_ERROR(
        CheckWorldSize(params.world_size, max_world_size_).WithContext(RankName(job, rank)));
  if (it == jobs_.end() && expired_.erase(job) != 0)
    expired_order_.erase(std::find(expired_order_.begin(), expired_order_.end(), job));
  if (it != jobs_.end()) {
    JobState& state = it->second;
    if (!MayAccess(params.owner, state.params.owner))
      return PermissionDenied(RankName(job, rank) + ": the job belongs to " +
                              Describe(state.params.owner));
    // Before the params: a second reader of a joined rank is told that, not how it differs.
    if (rank < state.joined.size() && state.joined[rank])
      return AlreadyExists(RankName(job, rank) + " is already joined");
    EMBER_RETURN_IF_ERROR(CheckSameJob(job, rank, state.params, params));
    Status same_start = CheckSameStart(job, rank, state.params, params);
    if (!same_start.ok()) {
      bool anyone_joined = false;
      for (bool joined : state.joined) anyone_joined = anyone_joined || joined;
      if (anyone_joined) return same_start;
      // Nobody is left of the old run: a restart from a checkpoint replaces it.
      jobs_.erase(it);
      it = jobs_.end();
    }
  }
  const bool created = it == jobs_.end();
  if (created) {
    EMBER_ASSIGN_OR_RETURN(JobState fresh, NewJob(job, params));
    it = jobs_.emplace(job, std::move(fresh)).first;
    if (observer_ != nullptr) observer_->JobCreated(job, params);
  }
  JobState& state = it->second;
  // A job made by another node's rank, or replayed from the journal, knows its blocks by
  // digest only: a rank of this node brings them (its dataset's, the same digest).
  if (state.params.shuffle_shape.starts == nullptr && params.shuffle_shape.starts != nullptr)
    state.params.shuffle_shape.starts = params.shuffle_shape.starts;
  if (rank >= state.params.world_size) {
    Status out_of_range = InvalidArgument(RankName(job, rank) +
                                          " is out of range for world_size " +
                                          std::to_string(state.params.world_size));
    // Only a job this call created goes again: a replayed one keeps its progress.
    bool anyone = false;
    for (bool came : state.ever_joined) anyone = anyone || came;
    if (!anyone && created) {
      jobs_.erase(it);
      if (observer_ != nullptr) observer_->JobForgotten(job);
    }
    return out_of_range;
  }
  if (state.joined[rank]) return AlreadyExists(RankName(job, rank) + " is already joined");
  state.joined[rank] = true;
  state.ever_joined[rank] = true;
  state.nodes.resize(state.params.world_size);
  state.nodes[rank].clear();
  return Status::Ok();
}

Result<BatchLease> JobLedger::Next(const std::string& job, uint32_t rank, uint64_t epoch) {
  OrderKey key;
  Result<BatchLease> lease = Internal("unset");
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return Missing(job);
    const JobParams& p = it->second.params;
    key = {p.num_samples, p.seed, p.shuffle, p.shuffle_shape};
    if (p.shuffle && p.shuffle_shape.by_shards() && p.shuffle_shape.starts == nullptr)
      return FailedPrecondition(RankName(job, rank) + ": the job is shuffled by shards and "
                                "no rank joined it here with its dataset's shards");
    lease = NextLocked(job, it->second, rank, epoch);
  }
  if (lease.ok())
    lease->sample_ids = orders_.SliceIds(key, lease->epoch, {lease->step_begin, lease->step_end},
                                         lease->positions);
  return lease;
}

std::vector<Result<BatchLease>> JobLedger::Next(const std::string& job,
                                                const std::vector<RankWant>& wants) {
  MutexLock lock(&mu_);
  std::vector<Result<BatchLease>> out;
  out.reserve(wants.size());
  auto it = jobs_.find(job);
  for (const RankWant& want : wants) {
    if (it == jobs_.end())
      out.push_back(Missing(job));
    else
      out.push_back(NextLocked(job, it->second, want.rank, want.epoch));
  }
  return out;
}

Result<BatchLease> JobLedger::NextLocked(const std::string& job, JobState& state, uint32_t rank,
                                         uint64_t epoch) {
  if (rank >= state.joined.size() || !state.joined[rank])
    return NotFound(RankName(job, rank) + " is not joined");
  auto exhausted = [&](uint64_t batches) {
    return FailedPrecondition(RankName(job, rank) + " already received all " +
                              std::to_string(batches) + " batches of epoch " +
                              std::to_string(epoch));
  };
  if (state.IsFinished(epoch)) return exhausted(state.batches_per_rank);

  EMBER_ASSIGN_OR_RETURN(EpochMap::iterator eit, EpochOf(job, state, epoch));
  EpochState& es = eit->second;
  RankState& rs = es.ranks[rank];
  const uint64_t steps = es.layout.steps();
  uint64_t batch = std::max(rs.next, rs.done_below);
  while (batch < steps && (rs.Done(batch) || rs.leased.count(batch) != 0)) ++batch;
  if (batch >= steps) return exhausted(steps);
  rs.leased.insert(batch);
  rs.next = batch + 1;
  ++state.batches_leased;

  BatchLease lease;
  lease.epoch = epoch;
  lease.batch = batch;
  lease.index_in_epoch = batch;
  lease.last_in_epoch = batch + 1 == steps;
  lease.step_begin = es.layout.step_starts[batch];
  lease.step_end = es.layout.step_starts[batch + 1];
  lease.positions = es.layout.Slice(batch, rank);
  return lease;
}

Status JobLedger::Commit(const std::string& job, uint32_t rank, uint64_t epoch, uint64_t batch) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return Missing(job);
  bool committed = false;
  Status status = CommitLocked(job, it->second, rank, epoch, batch, &committed);
  if (committed && observer_ != nullptr) observer_->BatchCommitted(job, epoch, batch, {rank});
  return status;
}

std::vector<Status> JobLedger::Commit(const std::string& job,
                                      const std::vector<RankBatch>& commits) {
  MutexLock lock(&mu_);
  std::vector<Status> out;
  out.reserve(commits.size());
  auto it = jobs_.find(job);
  // Ranks that consumed each (epoch, batch) now, for the observer.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint32_t>> reports;
  for (const RankBatch& c : commits) {
    if (it == jobs_.end()) {
      out.push_back(Missing(job));
      continue;
    }
    bool committed = false;
    out.push_back(CommitLocked(job, it->second, c.rank, c.epoch, c.batch, &committed));
    if (committed) reports[{c.epoch, c.batch}].push_back(c.rank);
  }
  if (observer_ == nullptr) return out;
  for (auto& [step, ranks] : reports) {
    std::sort(ranks.begin(), ranks.end());
    observer_->BatchCommitted(job, step.first, step.second, ranks);
  }
  return out;
}

Status JobLedger::CommitLocked(const std::string& job, JobState& state, uint32_t rank,
                               uint64_t epoch, uint64_t batch, bool* committed) {
  *committed = false;
  if (state.IsFinished(epoch)) return Status::Ok();
  auto eit = state.epochs.find(epoch);
  auto no_lease = [&] {
    return NotFound(RankName(job, rank) + " holds no lease of batch " + std::to_string(batch) +
                    " of epoch " + std::to_string(epoch));
  };
  if (eit == state.epochs.end() || rank >= eit->second.ranks.size()) return no_lease();
  RankState& rs = eit->second.ranks[rank];
  if (rs.Done(batch)) return Status::Ok();
  if (rs.leased.erase(batch) == 0) return no_lease();
  Consume(state, eit, rank, batch);
  *committed = true;
  return Status::Ok();
}

Status JobLedger::Resume(const std::string& job, uint32_t rank,
                         const std::vector<HeldBatch>& held) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return Missing(job);
  JobState& state = it->second;
  if (rank >= state.joined.size() || !state.joined[rank])
    return NotFound(RankName(job, rank) + " is not joined");
  for (const HeldBatch& h : held) {
    if (state.IsFinished(h.epoch)) continue;
    EMBER_ASSIGN_OR_RETURN(EpochMap::iterator eit, EpochOf(job, state, h.epoch));
    if (h.batch >= eit->second.layout.steps())
      return InvalidArgument(RankName(job, rank) + ": batch " + std::to_string(h.batch) +
                             " of epoch " + std::to_string(h.epoch) + " is beyond its " +
                             std::to_string(eit->second.layout.steps()) + " steps");
    RankState& rs = eit->second.ranks[rank];
    if (rs.Done(h.batch)) continue;
    if (!h.consumed) {
      rs.leased.insert(h.batch);
      continue;
    }
    rs.leased.erase(h.batch);
    Consume(state, eit, rank, h.batch);
    if (observer_ != nullptr) observer_->BatchCommitted(job, h.epoch, h.batch, {rank});
  }
  return Status::Ok();
}

Result<JobLedger::EpochMap::iterator> JobLedger::EpochOf(const std::string& job,
                                                         JobState& state, uint64_t epoch) {
  auto eit = state.epochs.find(epoch);
  if (eit != state.epochs.end()) return eit;
  const JobParams& p = state.params;
  const uint64_t start = epoch == p.start_epoch ? p.start_position : 0;
  Result<StepLayout> layout = MakeStepLayout(p.num_samples, p.batch_size, p.world_size, start);
  if (!layout.ok())
    return layout.status().WithContext(JobName(job) + ": epoch " + std::to_string(epoch));
  EpochState fresh;
  fresh.layout = std::move(layout).value();
  fresh.ranks.resize(p.world_size);
  ++state.epochs_started;
  return state.epochs.emplace(epoch, std::move(fresh)).first;
}

bool JobLedger::Consume(JobState& state, EpochMap::iterator eit, uint32_t rank, uint64_t batch) {
  EpochState& es = eit->second;
  RankState& rs = es.ranks[rank];
  rs.done_above.insert(batch);
  while (!rs.done_above.empty() && *rs.done_above.begin() == rs.done_below) {
    rs.done_above.erase(rs.done_above.begin());
    ++rs.done_below;
  }
  ++state.batches_committed;
  if (rs.done_below == es.layout.steps() && ++es.ranks_done == es.ranks.size()) {
    const uint64_t epoch = eit->first;
    state.epochs.erase(eit);
    state.MarkFinished(epoch);
    return true;
  }
  return false;
}

void JobLedger::Leave(const std::string& job, uint32_t rank) {
  MutexLock lock(&mu_);
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
    if (observer_ != nullptr) observer_->JobForgotten(job);
    return;
  }
  for (auto& [epoch, es] : state.epochs) {
    RankState& rs = es.ranks[rank];
    rs.leased.clear();
    rs.next = rs.done_below;
  }
}

Result<uint64_t> JobLedger::BatchesPerRank(const std::string& job) const {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return Missing(job);
  return it->second.batches_per_rank;
}

std::optional<Principal> JobLedger::OwnerOf(const std::string& job) const {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.params.owner;
}

std::vector<std::string> JobLedger::JobsOwnedBy(uid_t uid) const {
  MutexLock lock(&mu_);
  std::vector<std::string> owned;
  for (const auto& [job, state] : jobs_)
    if (state.params.owner.known() && state.params.owner.uid == uid) owned.push_back(job);
  return owned;
}

std::vector<JobSummary> JobLedger::Summaries(const OwnerFilter& include) const {
  MutexLock lock(&mu_);
  std::vector<JobSummary> out;
  for (const auto& [name, state] : jobs_) {
    if (include && !include(state.params.owner)) continue;
    JobSummary s;
    s.job = name;
    s.params = state.params;
    s.epochs_started = state.epochs_started;
    s.batches_leased = state.batches_leased;
    s.batches_committed = state.batches_committed;
    s.batches_per_rank = state.batches_per_rank;
    for (const auto& [epoch, es] : state.epochs)
      for (const RankState& rs : es.ranks) s.leases_in_flight += rs.leased.size();
    for (uint32_t r = 0; r < state.params.world_size; ++r) s.ranks_joined += state.joined[r];
    const uint32_t listed = std::min(state.params.world_size, kMaxRanksListed);
    s.ranks_unlisted = state.params.world_size - listed;
    for (uint32_t r = 0; r < listed; ++r) {
      RankProgress progress;
      progress.rank = r;
      progress.joined = state.joined[r];
      if (r < state.nodes.size()) progress.node = state.nodes[r];
      progress.epoch = state.finished_below;
      for (const auto& [epoch, es] : state.epochs) {
        const RankState& rs = es.ranks[r];
        if (rs.done_below == es.layout.steps()) {
          progress.epoch = epoch + 1;
          continue;
        }
        progress.epoch = epoch;
        progress.consumed = rs.done_below;
        progress.leased = rs.leased.size();
        break;
      }
      s.ranks.push_back(progress);
    }
    out.push_back(std::move(s));
  }
  return out;
}

void JobLedger::SetRankNode(const std::string& job, uint32_t rank, const std::string& node) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end() || rank >= it->second.joined.size() || !it->second.joined[rank]) return;
  it->second.nodes.resize(it->second.params.world_size);
  it->second.nodes[rank] = node;
}

Status JobLedger::Missing(const std::string& job) const {
  auto expired = expired_.find(job);
  if (expired != expired_.end()) return FailedPrecondition(expired->second);
  return NotFound(JobName(job) + " does not exist");
}

std::vector<std::string> JobLedger::ExpireUnfilled(uint64_t now_micros, uint64_t timeout_micros) {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    JobState& state = it->second;
    std::vector<uint32_t> missing;
    for (uint32_t r = 0; r < state.ever_joined.size(); ++r)
      if (!state.ever_joined[r]) missing.push_back(r);
    if (missing.empty()) {
      state.unfilled_since = 0;
      ++it;
      continue;
    }
    if (state.unfilled_since == 0) state.unfilled_since = std::max<uint64_t>(now_micros, 1);
    if (now_micros < state.unfilled_since + timeout_micros) {
      ++it;
      continue;
    }
    std::string ranks;
    for (size_t i = 0; i < missing.size() && i < 8; ++i)
      ranks += (i == 0 ? "" : ", ") + std::to_string(missing[i]);
    if (missing.size() > 8) ranks += " and " + std::to_string(missing.size() - 8) + " more";
    std::string message = JobName(it->first) + " expired: rank" +
                          (missing.size() == 1 ? " " : "s ") + ranks + " of " +
                          std::to_string(state.params.world_size) + " did not join within " +
                          std::to_string(timeout_micros / 1000000) + " s";
    const std::string job = it->first;
    it = jobs_.erase(it);
    if (observer_ != nullptr) observer_->JobForgotten(job);
    if (expired_.size() >= kExpiredRemembered) {
      expired_.erase(expired_order_.front());
      expired_order_.pop_front();
    }
    expired_[job] = message;
    expired_order_.push_back(job);
    out.push_back(std::move(message));
  }
  return out;
}

void JobLedger::SetObserver(LedgerObserver* observer) {
  MutexLock lock(&mu_);
  observer_ = observer;
}

std::vector<JobSnapshot> JobLedger::Snapshot() const {
  std::vector<JobSnapshot> out;
  Snapshot([&out](const std::vector<JobSnapshot>& jobs) { out = jobs; });
  return out;
}

void JobLedger::Snapshot(
    const std::function<void(const std::vector<JobSnapshot>&)>& visit) const {
  MutexLock lock(&mu_);
  std::vector<JobSnapshot> out;
  out.reserve(jobs_.size());
  for (const auto& [name, state] : jobs_) {
    JobSnapshot s;
    s.job = name;
    s.params = state.params;
    s.finished_below = state.finished_below;
    s.finished_above.assign(state.finished_above.begin(), state.finished_above.end());
    for (const auto& [epoch, es] : state.epochs) {
      for (uint32_t r = 0; r < es.ranks.size(); ++r) {
        const RankState& rs = es.ranks[r];
        if (rs.done_below == 0 && rs.done_above.empty()) continue;
        JobSnapshot::Consumed c;
        c.epoch = epoch;
        c.rank = r;
        c.done_below = rs.done_below;
        c.done_above.assign(rs.done_above.begin(), rs.done_above.end());
        s.consumed.push_back(std::move(c));
      }
    }
    out.push_back(std::move(s));
  }
  visit(out);
}

Status JobLedger::ReplayJob(const std::string& job, const JobParams& params) {
  EMBER_ASSIGN_OR_RETURN(JobState fresh, NewJob(job, params));
  MutexLock lock(&mu_);
  jobs_.insert_or_assign(job, std::move(fresh));
  return Status::Ok();
}

Status JobLedger::ReplayConsumed(const std::string& job, uint32_t rank, uint64_t epoch,
                                 uint64_t first, uint64_t end) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return Missing(job);
  JobState& state = it->second;
  if (rank >= state.params.world_size)
    return InvalidArgument(RankName(job, rank) + " is out of range for world_size " +
                           std::to_string(state.params.world_size));
  if (first >= end || state.IsFinished(epoch)) return Status::Ok();
  EMBER_ASSIGN_OR_RETURN(EpochMap::iterator eit, EpochOf(job, state, epoch));
  const uint64_t steps = eit->second.layout.steps();
  if (end > steps)
    return InvalidArgument(RankName(job, rank) + ": batch " + std::to_string(end - 1) +
                           " of epoch " + std::to_string(epoch) + " is out of range (" +
                           std::to_string(steps) + " batches)");
  for (uint64_t batch = first; batch < end; ++batch) {
    if (eit->second.ranks[rank].Done(batch)) continue;
    if (Consume(state, eit, rank, batch)) break;
  }
  return Status::Ok();
}

Status JobLedger::ReplayEpochsFinished(const std::string& job, uint64_t first, uint64_t end) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return Missing(job);
  JobState& state = it->second;
  for (uint64_t epoch = std::max(first, state.finished_below); epoch < end; ++epoch) {
    state.epochs.erase(epoch);
    state.MarkFinished(epoch);
  }
  return Status::Ok();
}

void JobLedger::ReplayForget(const std::string& job) {
  MutexLock lock(&mu_);
  jobs_.erase(job);
}

}  // namespace ember::daemon
