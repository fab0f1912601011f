#include "daemon/coordinator/remote_coordinator.h"

#include <spdlog/spdlog.h>

#include "common/rpc_status.h"
#include "daemon/coordinator/epoch_plan.h"
#include "daemon/coordinator/job_name.h"

namespace ember::daemon {
namespace {

// What a rank's proxy keeps of its batches, and reports when joining again: its last two
// epochs (older ones were durable at the coordinator long ago).
void KeepLastTwoEpochs(std::map<uint64_t, std::map<uint64_t, bool>>& held) {
  while (held.size() > 2) held.erase(held.begin());
}

}  // namespace

RemoteCoordinator::RemoteCoordinator(kj::Timer& timer, CoordinatorChannel& channel,
                                     std::string address, RemoteCoordinatorOptions options)
    : timer_(timer),
      channel_(channel),
      address_(std::move(address)),
      options_(std::move(options)),
      executor_(kj::getCurrentThreadExecutor().addRef()),
      loop_thread_(std::this_thread::get_id()),
      error_log_(std::make_unique<rpc_status::ReportFailures>(
          [address = address_](const Status& s) {
            spdlog::warn("coordinator {}: {}", address, s.ToString());
          })),
      tasks_(kj::heap<kj::TaskSet>(*error_log_)) {}

RemoteCoordinator::~RemoteCoordinator() noexcept {
  if (!shut_down_) Shutdown();
}

RemoteCoordinator::Traffic RemoteCoordinator::traffic() const {
  Traffic t = traffic_;
  t.channel = channel_.traffic();
  return t;
}

std::vector<JobSummary> RemoteCoordinator::Summaries(const OwnerFilter& include) const {
  std::map<std::string, JobSummary> jobs;
  for (const auto& [key, state] : ranks_) {
    const auto& [job, rank] = key;
    if (include && !include(state.params.owner)) continue;
    JobSummary& s = jobs[job];
    s.job = job;
    s.params = state.params;
    s.coordinator = address_;
    ++s.ranks_joined;
    RankProgress progress;
    progress.rank = rank;
    progress.joined = true;
    progress.node = options_.node;
    // Its latest epoch of leases, and its batches consumed in a row and leased there.
    for (const auto& [epoch, batches] : state.held) {
      progress.epoch = epoch;
      progress.consumed = 0;
      progress.leased = 0;
      bool in_a_row = true;
      for (const auto& [batch, consumed] : batches) {
        in_a_row = in_a_row && consumed && batch == progress.consumed;
        if (in_a_row) ++progress.consumed;
        if (!consumed) ++progress.leased;
        if (!consumed) ++s.leases_in_flight;
      }
    }
    s.batches_leased += state.leases;
    s.batches_committed += state.commits;
    if (s.ranks.size() < kMaxRanksListed) {
      s.ranks.push_back(progress);
    } else {
      ++s.ranks_unlisted;
    }
  }
  std::vector<JobSummary> out;
  MutexLock lock(&mu_);
  for (auto& [job, s] : jobs) {
    auto per_rank = batches_per_rank_.find(job);
    if (per_rank != batches_per_rank_.end()) s.batches_per_rank = per_rank->second;
    out.push_back(std::move(s));
  }
  return out;
}

void RemoteCoordinator::Shutdown() {
  if (!shut_down_ && channel_.traffic().connections > 0) {
    const Traffic t = traffic();
    spdlog::info(
        "coordinator {}: traffic: {} connections, {} joinJob, {} exchange, {} openJob calls; "
        "{} leases received, {} commits sent; {} bytes sent, {} bytes received (RPC, before TLS)",
        address_, t.channel.connections, t.joins, t.exchanges, t.channel.opens, t.leases,
        t.commits, t.channel.bytes_sent, t.channel.bytes_received);
  }
  shut_down_ = true;
  // The calls waiting for an exchange fail now, not when their fulfillers go.
  const Status stopping = Unavailable("coordinator " + address_ + ": this daemon is shutting down");
  for (auto& [job, box] : outboxes_)
    for (Want& want : box.wants) want.answer->fulfill(Result<BatchLease>(stopping));
  outboxes_.clear();
  ranks_.clear();
  tasks_ = nullptr;
  channel_.Reset();
}

template <typename F>
bool RemoteCoordinator::OnLoop(F&& f) {
  if (std::this_thread::get_id() == loop_thread_) {
    f();
    return true;
  }
  // The loop is gone (the daemon is stopping): executeSync throws DISCONNECTED.
  return kj::runCatchingExceptions([&] { executor_->executeSync(std::forward<F>(f)); }) ==
         nullptr;
}

Status RemoteCoordinator::Join(const std::string& job, uint32_t rank, const JobParams& params,
                               const std::vector<HeldBatch>& held) {
  Result<StepLayout> layout =
      MakeStepLayout(params.num_samples, params.batch_size, params.world_size);
  if (!layout.ok()) return layout.status().WithContext("job '" + job + "'");
  if (rank >= params.world_size)
    return InvalidArgument(RankName(job, rank) + " is out of range for world_size " +
                           std::to_string(params.world_size));
  const bool sent = OnLoop([&] {
    if (shut_down_) return;
    RankState& state = ranks_[{job, rank}];
    state = RankState{};
    state.params = params;
    for (const HeldBatch& h : held) state.held[h.epoch][h.batch] = h.consumed;
    KeepLastTwoEpochs(state.held);
    SendJoin(job, rank, state, /*again=*/!held.empty());
  });
  if (!sent) return Unavailable("coordinator " + address_ + ": this daemon is shutting down");
  MutexLock lock(&mu_);
  batches_per_rank_[job] = layout->steps();
  order_keys_[job] = {params.num_samples, params.seed, params.shuffle, params.shuffle_shape};
  return Status::Ok();
}

void RemoteCoordinator::SendJoin(const std::string& job, uint32_t rank, RankState& state,
                                 bool again) {
  PeerJoin join{job, rank, state.params, options_.node, {}};
  if (again) {
    // What `held` keeps: the last two epochs (KeepLastTwoEpochs).
    for (const auto& [epoch, batches] : state.held)
      for (const auto& [batch, consumed] : batches)
        join.held.push_back(HeldBatch{epoch, batch, consumed});
    spdlog::info("{}: joining again through coordinator {} with {} batches it holds",
                 RankName(job, rank), address_, join.held.size());
  }
  state.rejoining = again;
  state.generation = channel_.Connect();
  ++traffic_.joins;
  // The old membership first: on the same connection, the coordinator must see it leave.
  state.membership.reset();
  // A refusal comes back as the answer to the rank's next exchange entry.
  state.membership = channel_.Join(join);
}

Result<BatchLease> RemoteCoordinator::Next(const std::string& job, uint32_t rank,
                                           uint64_t epoch) {
  if (std::this_thread::get_id() == loop_thread_)
    return Internal("RemoteCoordinator::Next called on the event loop's thread");
  const std::string context = "coordinator " + address_;
  const auto deadline = std::chrono::steady_clock::now() + options_.reconnect_timeout;
  std::chrono::milliseconds backoff(100);
  for (;;) {
    Result<BatchLease> lease = Unavailable(context + ": this daemon is shutting down");
    KJ_IF_MAYBE(e, kj::runCatchingExceptions(
                        [&] { lease = NextOnLoop(job, rank, epoch, context); })) {
      return Unavailable(context + ": " + e->getDescription().cStr());
    }
    // After a join again (here, or by a restarted daemon whose rank reports what it holds),
    // "already joined" means the coordinator has not yet seen the old connection end: wait
    // for it like for an unreachable coordinator.
    const StatusCode code = lease.ok() ? StatusCode::kOk : lease.status().code();
    bool rejoining = false;
    if (code == StatusCode::kAlreadyExists)
      OnLoop([&] {
        auto it = ranks_.find({job, rank});
        rejoining = it != ranks_.end() && it->second.rejoining;
      });
    if (code != StatusCode::kUnavailable && !rejoining) {
      if (lease.ok()) {
        // The lease names positions; their samples are this node's to look up.
        const OrderKey key = OrderKeyOf(job);
        const PositionRange& at = lease->positions;
        if (at.begin > at.end || at.end > key.num_samples)
          return Internal(context + ": " + RankName(job, rank) + ": positions [" +
                          std::to_string(at.begin) + ", " + std::to_string(at.end) +
                          ") of epoch " + std::to_string(lease->epoch) +
                          " are not within the job's " + std::to_string(key.num_samples) +
                          " samples");
        lease->sample_ids =
            orders_.SliceIds(key, lease->epoch, {lease->step_begin, lease->step_end}, at);
      }
      return lease;
    }
    if (std::chrono::steady_clock::now() + backoff > deadline)
      return lease.status().WithContext(
          "gave up after " + std::to_string(options_.reconnect_timeout.count() / 1000) +
          " s of trying to reach it again");
    spdlog::warn("{}: {}; trying again in {} ms", RankName(job, rank),
                 lease.status().message(), backoff.count());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    const bool rejoined = OnLoop([&] {
      auto it = ranks_.find({job, rank});
      if (shut_down_ || it == ranks_.end()) return;
      // The connection the rank joined on may look alive a little longer than the
      // coordinator: start over, unless another of this node's ranks already did (a newer
      // connection), which would cut that rank off again.
      if (it->second.generation == channel_.Connect()) channel_.Reset();
      SendJoin(job, rank, it->second, /*again=*/true);
    });
    if (!rejoined) return Unavailable(context + ": this daemon is shutting down");
  }
}

Result<BatchLease> RemoteCoordinator::NextOnLoop(const std::string& job, uint32_t rank,
                                                 uint64_t epoch, const std::string& context) {
  return executor_->executeSync([&]() -> kj::Promise<Result<BatchLease>> {
    if (shut_down_) return Result<BatchLease>(Unavailable(context + ": this daemon is shutting down"));
    auto it = ranks_.find({job, rank});
    if (it == ranks_.end() || it->second.membership == nullptr)
      return Result<BatchLease>(NotFound(RankName(job, rank) + " is not joined"));
    auto answer = kj::newPromiseAndFulfiller<Result<BatchLease>>();
    outboxes_[job].wants.push_back(Want{rank, epoch, kj::mv(answer.fulfiller)});
    Schedule(job);
    // Whichever comes first: the answer, or the deadline's own value (no exception text
    // to recognize).
    kj::Promise<Result<BatchLease>> late =
        timer_.afterDelay(options_.call_timeout).then([context] {
          return Result<BatchLease>(DeadlineExceeded(context + ": no answer in time"));
        });
    return answer.promise.exclusiveJoin(kj::mv(late))
        .catch_([context](kj::Exception&& e) -> Result<BatchLease> {
          return rpc_status::FromException(e).WithContext(context);
        });
  });
}

void RemoteCoordinator::Schedule(const std::string& job) {
  Outbox& box = outboxes_[job];
  if (box.scheduled || box.in_flight) return;
  box.scheduled = true;
  tasks_->add(timer_.afterDelay(options_.batch_linger).then([this, job] {
    auto it = outboxes_.find(job);
    if (it == outboxes_.end()) return;
    it->second.scheduled = false;
    Flush(job);
  }));
}

void RemoteCoordinator::Flush(const std::string& job) {
  Outbox& box = outboxes_[job];
  if (box.in_flight || (box.commits.empty() && box.wants.empty())) return;
  const uint64_t live = channel_.Connect();
  // Ranks that joined on an earlier connection are not members on this one: their wants
  // fail as unreachable (Next joins them again) and their commits wait for that join,
  // which reports them.
  auto current = [&](uint32_t rank) {
    auto it = ranks_.find({job, rank});
    return it != ranks_.end() && it->second.generation == live;
  };
  std::vector<RankBatch> commits;
  for (const RankBatch& c : box.commits)
    if (current(c.rank)) commits.push_back(c);
  std::vector<Want> wants;
  std::vector<RankWant> asked;
  for (Want& w : box.wants) {
    if (current(w.rank)) {
      asked.push_back(RankWant{w.rank, w.epoch});
      wants.push_back(kj::mv(w));
    } else {
      w.answer->fulfill(Unavailable("coordinator " + address_ + ": " + channel_.error()));
    }
  }
  box.commits.clear();
  box.wants.clear();
  if (commits.empty() && wants.empty()) return;

  box.in_flight = true;
  ++traffic_.exchanges;
  traffic_.commits += commits.size();
  auto pending = kj::heap<std::vector<Want>>(kj::mv(wants));
  auto& answers = *pending;
  tasks_->add(channel_.Exchange(job, kj::mv(commits), kj::mv(asked))
                  .then([this, job, &answers](Result<ExchangeAnswer> answer) {
                    if (!answer.ok()) {
                      for (Want& want : answers) Answer(job, want, answer.status());
                      return;
                    }
                    std::vector<Result<BatchLease>>& leases = answer->leases;
                    for (size_t i = 0; i < answers.size(); ++i) {
                      if (i < leases.size())
                        Answer(job, answers[i], kj::mv(leases[i]));
                      else
                        Answer(job, answers[i],
                               Internal("the coordinator answered " +
                                        std::to_string(leases.size()) + " of " +
                                        std::to_string(answers.size()) + " wants"));
                    }
                    for (const Status& error : answer->commit_errors)
                      spdlog::warn("coordinator {}: job '{}': {}", address_, job,
                                   error.ToString());
                  })
                  .then([this, job] {
                    auto it = outboxes_.find(job);
                    if (it == outboxes_.end()) return;
                    it->second.in_flight = false;
                    Flush(job);
                  })
                  .attach(kj::mv(pending)));
}

void RemoteCoordinator::Answer(const std::string& job, Want& want, Result<BatchLease> lease) {
  auto it = ranks_.find({job, want.rank});
  if (lease.ok()) {
    ++traffic_.leases;
    if (it != ranks_.end()) {
      auto& held = it->second.held;
      held[lease->epoch].emplace(lease->batch, false);
      KeepLastTwoEpochs(held);
      ++it->second.leases;
      it->second.rejoining = false;
    }
    want.answer->fulfill(kj::mv(lease));
    return;
  }
  Status status = lease.status();
  if (status.code() != StatusCode::kFailedPrecondition &&
      status.code() != StatusCode::kInvalidArgument && status.code() != StatusCode::kNotFound &&
      status.code() != StatusCode::kAlreadyExists)
    status = status.WithContext("coordinator " + address_);
  want.answer->fulfill(Result<BatchLease>(status));
}

Status RemoteCoordinator::Commit(const std::string& job, uint32_t rank, uint64_t epoch,
                                 uint64_t batch) {
  OnLoop([&] {
    auto it = ranks_.find({job, rank});
    if (shut_down_ || it == ranks_.end()) return;
    auto held = it->second.held.find(epoch);
    if (held != it->second.held.end()) held->second[batch] = true;
    ++it->second.commits;
    if (it->second.membership == nullptr) return;
    outboxes_[job].commits.push_back({rank, epoch, batch});
    Schedule(job);
  });
  return Status::Ok();
}

void RemoteCoordinator::Leave(const std::string& job, uint32_t rank) {
  OnLoop([&] { ranks_.erase({job, rank}); });
}

OrderKey RemoteCoordinator::OrderKeyOf(const std::string& job) const {
  MutexLock lock(&mu_);
  auto it = order_keys_.find(job);
  return it == order_keys_.end() ? OrderKey{} : it->second;
}

Result<uint64_t> RemoteCoordinator::BatchesPerRank(const std::string& job) const {
  MutexLock lock(&mu_);
  auto it = batches_per_rank_.find(job);
  if (it == batches_per_rank_.end()) return NotFound("job '" + job + "' does not exist");
  return it->second;
}

}  // namespace ember::daemon
