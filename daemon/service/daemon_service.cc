#include "daemon/service/daemon_service.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "daemon/access/name_scope.h"
#include "daemon/coordinator/job_name.h"
#include "daemon/metrics/process_stats.h"
#include "daemon/service/dataset_details.h"

namespace ember::daemon {
namespace {

// The subsystems' own structs as the wire's (ember/daemon_status.h), each made here once.
JobStatus JobStatusOf(const JobSummary& job) {
  JobStatus out;
  out.job = job.job;
  out.world_size = job.params.world_size;
  out.dataset = job.params.dataset;
  out.epochs_started = job.epochs_started;
  out.batches_leased = job.batches_leased;
  out.batches_committed = job.batches_committed;
  out.batch_size = job.params.batch_size;
  out.batches_per_rank = job.batches_per_rank;
  out.ranks = job.ranks;
  out.ranks_unlisted = job.ranks_unlisted;
  out.ranks_joined = job.ranks_joined;
  out.coordinator = job.coordinator;
  out.leases_in_flight = job.leases_in_flight;
  return out;
}

StreamStatus StreamStatusOf(const StreamStats& stream) {
  StreamStatus out;
  out.stream_id = stream.id;
  out.job = stream.params.job;
  out.rank = stream.params.rank;
  out.world_size = stream.params.world_size;
  out.dataset = stream.params.dataset;
  out.epoch = stream.epoch;
  out.batches_published = stream.batches_published;
  out.batches_consumed = stream.batches_consumed;
  out.samples_per_second = stream.samples_per_second;
  out.ring_fill = stream.ring_fill;
  out.slot_count = stream.slot_count;
  out.prefetch_depth = stream.prefetch_depth;
  out.slots_touched = stream.slots_touched;
  out.samples_skipped = stream.samples_skipped;
  out.samples_published = stream.samples_published;
  out.bytes_published = stream.bytes_published;
  out.decode_errors = stream.decode_errors;
  out.data_stall_seconds = stream.data_stall_seconds;
  out.share = stream.params.share;
  out.shared_batches = stream.shared_batches;
  out.remote_rows = stream.remote_rows;
  return out;
}

DecodeWorkerStatus DecodeWorkerStatusOf(const DecodeWorkerStats& worker) {
  DecodeWorkerStatus out;
  out.address = worker.address;
  out.up = worker.up;
  out.last_error = worker.last_error;
  out.calls = worker.calls;
  out.rows = worker.rows;
  out.bytes = worker.bytes;
  out.failed_calls = worker.failed_calls;
  out.rows_per_second = worker.rows_per_second;
  out.share = worker.share;
  return out;
}

PendingSegmentStatus SegmentStatusOf(const PendingSegment& segment) {
  PendingSegmentStatus out;
  out.job = segment.job;
  out.name = segment.name;
  out.world_size = segment.world_size;
  out.bytes = segment.bytes;
  out.missing_ranks = segment.missing_ranks;
  out.missing_unlisted = segment.missing_unlisted;
  out.age_seconds = segment.age_micros / 1e6;
  return out;
}

}  // namespace

Wait::Wait(KvStore& kv, KvStore::WaiterId id, std::shared_ptr<bool> completed,
           std::function<void()> on_timeout)
    : kv_(kv), id_(id), completed_(std::move(completed)), on_timeout_(std::move(on_timeout)) {}

Wait::~Wait() {
  if (*completed_) return;
  *completed_ = true;
  kv_.CancelWaiter(id_);
}

void Wait::Expire() {
  if (*completed_) return;
  *completed_ = true;
  kv_.CancelWaiter(id_);
  on_timeout_();
}

JobMembership::JobMembership(DaemonService& service, std::string job, const Principal& caller)
    : service_(service), job_(std::move(job)), caller_(caller) {
  const Principal owner = service_.JobOwner(job_).value_or(caller);
  ++service_.members_.try_emplace(job_, DaemonService::Members{owner, 0}).first->second.count;
}

JobMembership::~JobMembership() { service_.Leave(job_); }

std::string JobMembership::name() const { return CallerName(caller_, job_); }


Status JobMembership::KvSet(const std::string& key, std::string value) {
  return CallerNames(caller_, service_.deps_.kv->Set(job_, key, std::move(value)));
}

std::unique_ptr<Wait> JobMembership::MakeWait(std::optional<KvStore::WaiterId> id,
                                              std::shared_ptr<bool> completed,
                                              uint32_t timeout_ms,
                                              std::function<void()> on_timeout) {
  if (!id) return nullptr;
  auto wait = std::make_unique<Wait>(*service_.deps_.kv, *id, std::move(completed),
                                     std::move(on_timeout));
  if (timeout_ms == 0) {
    wait->Expire();
    return nullptr;
  }
  return wait;
}

std::unique_ptr<Wait> JobMembership::KvGet(const std::string& key, uint32_t timeout_ms,
                                           std::function<void(Result<std::string>)> done) {
  auto completed = std::make_shared<bool>(false);
  auto id = service_.deps_.kv->Get(job_, key, [completed, done](const std::string& value) {
    if (*completed) return;
    *completed = true;
    done(value);
  });
  if (!id.ok()) {
    done(CallerNames(caller_, id.status()));
    return nullptr;
  }
  Status timeout = DeadlineExceeded("waiting for key '" + key + "' of job '" + name() +
                                    "': timed out after " + std::to_string(timeout_ms) + " ms");
  return MakeWait(*id, std::move(completed), timeout_ms,
                  [done, timeout] { done(timeout); });
}

Result<int64_t> JobMembership::KvAdd(const std::string& key, int64_t delta) {
  return CallerNames(caller_, service_.deps_.kv->Add(job_, key, delta));
}

bool JobMembership::KvCheck(const std::vector<std::string>& keys) const {
  return service_.deps_.kv->Check(job_, keys);
}

bool JobMembership::KvDelete(const std::string& key) {
  return service_.deps_.kv->Delete(job_, key);
}

std::unique_ptr<Wait> JobMembership::Barrier(const std::string& barrier, uint32_t world_size,
                                             uint64_t round, uint32_t timeout_ms,
                                             std::function<void(Result<uint64_t>)> done,
                                             uint64_t member) {
  auto completed = std::make_shared<bool>(false);
  auto id = service_.deps_.kv->Arrive(job_, barrier, world_size, round,
                                      [completed, done](uint64_t round_done) {
                                        if (*completed) return;
                                        *completed = true;
                                        done(round_done);
                                      },
                                      member);
  if (!id.ok()) {
    done(CallerNames(caller_, id.status()));
    return nullptr;
  }
  Status timeout = DeadlineExceeded("barrier '" + barrier + "' of job '" + name() + "' (" +
                                    std::to_string(world_size) + " ranks): timed out after " +
                                    std::to_string(timeout_ms) + " ms");
  return MakeWait(*id, std::move(completed), timeout_ms, [done, timeout] { done(timeout); });
}

Result<std::shared_ptr<SharedMemory>> JobMembership::OpenSharedMemory(const std::string& segment,
                                                                      uint32_t rank,
                                                                      uint32_t world_size,
                                                                      uint64_t bytes) {
  return CallerNames(caller_,
                        service_.deps_.segments->Open(job_, segment, rank, world_size, bytes,
                                                      service_.members_.at(job_).owner));
}

DaemonService::DaemonService(ServiceDeps deps)
    : deps_(std::move(deps)),
      start_micros_(deps_.env->NowMicros()),
      incarnation_((uint64_t{std::random_device{}()} << 32) ^ std::random_device{}() ^
                   start_micros_),
      registrations_(std::make_shared<Registrations>(deps_.env)) {}

uint64_t JobMembership::incarnation() const { return service_.incarnation(); }

Status DaemonService::AdmitConnection(const Principal& caller) {
  if (caller.privileged) return Status::Ok();
  uint32_t& open = connections_[caller.uid];
  if (open >= deps_.user_limits.connections)
    return ResourceExhausted("uid " + std::to_string(caller.uid) + " has " +
                             std::to_string(open) +
                             " connections, the most one user may open (user_limits.connections)");
  ++open;
  return Status::Ok();
}

void DaemonService::ReleaseConnection(const Principal& caller) {
  if (caller.privileged) return;
  auto it = connections_.find(caller.uid);
  if (it != connections_.end() && --it->second == 0) connections_.erase(it);
}

Principal DaemonService::Identify(const Credentials& creds) const {
  if (deps_.access != nullptr) return deps_.access->Identify(creds);
  return AccessPolicy(0, std::nullopt).Identify(creds);
}

void DaemonService::AddDataset(DatasetSpec spec, DatasetOwner owner,
                               std::function<void(Result<DatasetInfo>)> done) {
  Status named = ValidateDatasetName(spec.name);
  if (!named.ok()) {
    done(named);
    return;
  }
  spec.name = DatasetKey(owner.principal, spec.name, spec.shared);
  Catalog* catalog = deps_.catalog;
  const size_t max_owned = deps_.user_limits.datasets;
  // Followed from now (queued for the pool included) until the catalog answers.
  std::shared_ptr<Registrations::Registration> followed =
      registrations_->Begin(owner.principal, spec.name);
  boost::asio::post(*deps_.blocking, [catalog, spec = std::move(spec), owner = std::move(owner),
                                      max_owned, followed = std::move(followed),
                                      done = std::move(done)]() mutable {
    Result<DatasetInfo> added =
        catalog->Add(spec, owner, max_owned, followed ? followed->progress() : nullptr);
    followed.reset();
    done(std::move(added));
  });
}

Result<::ember::RegistrationProgress> DaemonService::RegistrationProgressOf(
    const Principal& caller, const std::string& dataset) const {
  return registrations_->Find(caller, dataset);
}

Result<::ember::DatasetDetails> DaemonService::DescribeDataset(const Principal& caller,
                                                               const std::string& dataset) const {
  EMBER_ASSIGN_OR_RETURN(DatasetInfo info, FindDataset(caller, dataset));
  std::vector<ShardCache::EntryInfo> cached;
  if (deps_.shards != nullptr) cached = deps_.shards->Entries();
  return DetailsOf(info, cached);
}

Result<::ember::ShardCacheStatus> DaemonService::GetShardCache(const Principal& caller) const {
  if (deps_.shards == nullptr) return FailedPrecondition("this emberd has no shard cache");
  // Stats first: a listing taken after them holds at least what they count as held.
  const ShardCacheStats stats = deps_.shards->stats();
  return CacheStatusOf(stats, deps_.shards->limit(), deps_.shards->Entries(),
                       ListDatasets(caller), caller.privileged);
}

Result<::ember::ShardCacheCleared> DaemonService::ClearShardCache(const Principal& caller) {
  if (!caller.privileged)
    return PermissionDenied("the shard cache is the node's, shared by every user's datasets: "
                            "only root and emberd's own user may clear it, not " +
                            Describe(caller));
  if (deps_.shards == nullptr) return FailedPrecondition("this emberd has no shard cache");
  const ShardCache::Cleared cleared = deps_.shards->Clear();
  ::ember::ShardCacheCleared out;
  out.entries = cleared.entries;
  out.bytes = cleared.bytes;
  out.in_use = cleared.in_use;
  return out;
}

std::vector<DatasetInfo> DaemonService::ListDatasets(const Principal& caller) const {
  std::vector<DatasetInfo> all = deps_.catalog->List();
  all.erase(std::remove_if(all.begin(), all.end(),
                           [&](const DatasetInfo& info) { return !MayRead(caller, info); }),
            all.end());
  return all;
}

Result<DatasetInfo> DaemonService::FindDataset(const Principal& caller,
                                               const std::string& dataset) const {
  const std::string own = ScopedKey(caller, dataset);
  if (Result<DatasetInfo> info = deps_.catalog->Get(own); info.ok()) return info;
  if (own != dataset) {
    Result<DatasetInfo> common = deps_.catalog->Get(dataset);
    if (common.ok() && MayRead(caller, *common)) return common;
  }
  return DatasetNotFound(dataset);
}

std::string DaemonService::DatasetKeyFor(const Principal& caller,
                                         const std::string& dataset) const {
  Result<DatasetInfo> found = FindDataset(caller, dataset);
  return found.ok() ? found->spec.name : ScopedKey(caller, dataset);
}

void DaemonService::RemoveDataset(const Principal& caller, std::string dataset,
                                  std::function<void(Status)> done) {
  Catalog* catalog = deps_.catalog;
  boost::asio::post(*deps_.blocking, [catalog, caller, dataset = DatasetKeyFor(caller, dataset),
                                      done = std::move(done)] {
    done(catalog->Remove(dataset, [&](const DatasetInfo& info) {
      if (MayAccess(caller, info.owner.principal)) return Status::Ok();
      // A shared dataset is visible: say why it stays; another is not there for them.
      if (!MayRead(caller, info)) return DatasetNotFound(dataset);
      return PermissionDenied("dataset '" + dataset + "' belongs to " +
                              Describe(info.owner.principal));
    }));
  });
}

Result<OpenedStream> DaemonService::OpenStream(const StreamParams& params) {
  Status allowed = CheckJobAccess(params.owner, params.job);
  if (allowed.ok()) allowed = CheckJobsLimit(params.owner, params.job);
  if (!allowed.ok())
    return allowed.WithContext("stream for job '" + params.job + "' rank " +
                               std::to_string(params.rank));
  auto stream = deps_.streams->Open(params);
  if (!stream.ok()) {
    return stream.status().WithContext("stream for job '" + params.job + "' rank " +
                                       std::to_string(params.rank));
  }
  const Stream& s = **stream;
  OpenedStream opened;
  opened.id = s.id();
  opened.ring_fd = s.ring_fd();
  opened.shared_fd = s.shared_fd();
  opened.start_epoch = s.params().start_epoch;
  opened.epochs = s.params().epochs;
  opened.share = params.share;
  opened.slot_count = s.slot_count();
  opened.slot_size = s.slot_size();
  opened.ring_bytes = s.ring_bytes();
  opened.batches_per_epoch = s.batches_per_epoch();
  opened.samples_per_epoch = s.samples_per_epoch();
  opened.fingerprint = s.fingerprint();
  return opened;
}

void DaemonService::CloseStream(uint64_t id) { deps_.streams->Close(id); }

Result<std::unique_ptr<JobMembership>> DaemonService::JoinJob(const Principal& caller,
                                                             const std::string& job) {
  EMBER_RETURN_IF_ERROR(CheckJobName(job, kMaxJobKeyBytes));
  EMBER_RETURN_IF_ERROR(CheckJobAccess(caller, job));
  EMBER_RETURN_IF_ERROR(CheckJobsLimit(caller, job));
  return std::unique_ptr<JobMembership>(new JobMembership(*this, job, caller));
}

Status DaemonService::CheckJobsLimit(const Principal& caller, const std::string& job) const {
  if (caller.privileged || members_.count(job) != 0 || deps_.ledger->OwnerOf(job))
    return Status::Ok();
  // Every kind counts: stores joined, and the ledger's jobs (streams, journaled ones).
  std::vector<std::string> owned = deps_.ledger->JobsOwnedBy(caller.uid);
  for (const auto& [name, members] : members_)
    if (members.owner.uid == caller.uid) owned.push_back(name);
  std::sort(owned.begin(), owned.end());
  const size_t count = std::unique(owned.begin(), owned.end()) - owned.begin();
  if (count < deps_.user_limits.jobs) return Status::Ok();
  return ResourceExhausted(JobName(CallerName(caller, job)) + ": uid " +
                           std::to_string(caller.uid) + " already has " + std::to_string(count) +
                           " jobs, the most one user may hold (user_limits.jobs)");
}

std::optional<Principal> DaemonService::JobOwner(const std::string& job) const {
  auto it = members_.find(job);
  if (it != members_.end()) return it->second.owner;
  return deps_.ledger->OwnerOf(job);
}

Status DaemonService::CheckJobAccess(const Principal& caller, const std::string& job) const {
  auto it = members_.find(job);
  const std::optional<Principal> members =
      it == members_.end() ? std::nullopt : std::optional<Principal>(it->second.owner);
  for (const std::optional<Principal>& owner : {members, deps_.ledger->OwnerOf(job)}) {
    if (owner && !MayAccess(caller, *owner))
      return PermissionDenied("job '" + job + "' belongs to " + Describe(*owner));
  }
  return Status::Ok();
}

int DaemonService::JobMembers(const std::string& job) const {
  auto it = members_.find(job);
  return it == members_.end() ? 0 : it->second.count;
}

void DaemonService::Leave(const std::string& job) {
  auto it = members_.find(job);
  if (it == members_.end()) return;
  if (--it->second.count > 0) return;
  members_.erase(it);
  deps_.kv->DropJob(job);
}

::ember::DaemonStatus DaemonService::GetStatus(const Principal& caller) const {
  ::ember::DaemonStatus status;
  status.version = deps_.version;
  status.pid = deps_.pid;
  status.uptime_seconds = (deps_.env->NowMicros() - start_micros_) / 1e6;
  for (const DatasetInfo& info : ListDatasets(caller)) status.datasets.push_back(PublicInfo(info));
  // Only what the caller may see is built at all (a job's ranks, a segment's).
  const OwnerFilter visible = [&caller](const Principal& owner) {
    return MayAccess(caller, owner);
  };
  std::vector<JobSummary> jobs = deps_.ledger->Summaries(visible);
  if (deps_.proxied_jobs) {
    for (JobSummary& job : deps_.proxied_jobs(visible)) jobs.push_back(std::move(job));
  }
  for (const JobSummary& job : jobs) status.jobs.push_back(JobStatusOf(job));
  for (const StreamStats& stream : deps_.streams->Stats())
    if (visible(stream.params.owner)) status.streams.push_back(StreamStatusOf(stream));
  status.shm_bytes_in_use = deps_.streams->shm_bytes_in_use();
  status.shm_bytes_budget = deps_.streams->shm_bytes_budget();
  const auto segment_visible = [&](const std::string& job) {
    std::optional<Principal> owner = JobOwner(job);
    return !owner || visible(*owner);
  };
  for (const PendingSegment& segment : deps_.segments->Pending(segment_visible))
    status.pending_segments.push_back(SegmentStatusOf(segment));
  Result<ProcessStats> process = ReadProcessStats(*deps_.env);
  if (process.ok()) {
    status.open_fds = process->open_fds;
    status.resident_bytes = process->resident_bytes;
  }
  // The node's, like the totals: addresses and counts, nothing of any user's.
  for (const DecodeWorkerStats& worker : deps_.streams->DecodeWorkers())
    status.decode_workers.push_back(DecodeWorkerStatusOf(worker));
  return status;
}

}  // namespace ember::daemon
