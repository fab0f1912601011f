#include "daemon/service/daemon_service.h"

#include <boost/asio/post.hpp>

#include <utility>

#include "daemon/coordinator/job_name.h"

namespace ember::daemon {

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

JobMembership::JobMembership(DaemonService& service, std::string job)
    : service_(service), job_(std::move(job)) {
  ++service_.members_[job_];
}

JobMembership::~JobMembership() { service_.Leave(job_); }

Status JobMembership::KvSet(const std::string& key, std::string value) {
  return service_.deps_.kv->Set(job_, key, std::move(value));
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
    done(id.status());
    return nullptr;
  }
  Status timeout = DeadlineExceeded("waiting for key '" + key + "' of job '" + job_ +
                                    "': timed out after " + std::to_string(timeout_ms) + " ms");
  return MakeWait(*id, std::move(completed), timeout_ms,
                  [done, timeout] { done(timeout); });
}

Result<int64_t> JobMembership::KvAdd(const std::string& key, int64_t delta) {
  return service_.deps_.kv->Add(job_, key, delta);
}

bool JobMembership::KvCheck(const std::vector<std::string>& keys) const {
  return service_.deps_.kv->Check(job_, keys);
}

bool JobMembership::KvDelete(const std::string& key) {
  return service_.deps_.kv->Delete(job_, key);
}

std::unique_ptr<Wait> JobMembership::Barrier(const std::string& barrier, uint32_t world_size,
                                             uint32_t timeout_ms,
                                             std::function<void(Status)> done) {
  auto completed = std::make_shared<bool>(false);
  auto id = service_.deps_.kv->Arrive(job_, barrier, world_size, [completed, done] {
    if (*completed) return;
    *completed = true;
    done(Status::Ok());
  });
  if (!id.ok()) {
    done(id.status());
    return nullptr;
  }
  Status timeout = DeadlineExceeded("barrier '" + barrier + "' of job '" + job_ + "' (" +
                                    std::to_string(world_size) + " ranks): timed out after " +
                                    std::to_string(timeout_ms) + " ms");
  return MakeWait(*id, std::move(completed), timeout_ms, [done, timeout] { done(timeout); });
}

Result<std::shared_ptr<SharedMemory>> JobMembership::OpenSharedMemory(const std::string& segment,
                                                                      uint32_t rank,
                                                                      uint32_t world_size,
                                                                      uint64_t bytes) {
  return service_.deps_.segments->Open(job_, segment, rank, world_size, bytes);
}

DaemonService::DaemonService(ServiceDeps deps)
    : deps_(std::move(deps)), start_micros_(deps_.env->NowMicros()) {}

void DaemonService::AddDataset(DatasetSpec spec, std::function<void(Result<DatasetInfo>)> done) {
  Catalog* catalog = deps_.catalog;
  boost::asio::post(*deps_.blocking, [catalog, spec = std::move(spec), done = std::move(done)] {
    done(catalog->Add(spec));
  });
}

std::vector<DatasetInfo> DaemonService::ListDatasets() const { return deps_.catalog->List(); }

Result<DatasetInfo> DaemonService::InspectDataset(const std::string& dataset) const {
  return deps_.catalog->Get(dataset);
}

void DaemonService::RemoveDataset(std::string dataset, std::function<void(Status)> done) {
  Catalog* catalog = deps_.catalog;
  boost::asio::post(*deps_.blocking,
                    [catalog, dataset = std::move(dataset), done = std::move(done)] {
                      done(catalog->Remove(dataset));
                    });
}

Result<OpenedStream> DaemonService::OpenStream(const StreamParams& params) {
  auto stream = deps_.streams->Open(params);
  if (!stream.ok()) {
    return stream.status().WithContext("stream for job '" + params.job + "' rank " +
                                       std::to_string(params.rank));
  }
  const Stream& s = **stream;
  OpenedStream opened;
  opened.id = s.id();
  opened.ring_fd = s.ring_fd();
  opened.slot_count = s.slot_count();
  opened.slot_size = s.slot_size();
  opened.ring_bytes = s.ring_bytes();
  opened.batches_per_epoch = s.batches_per_epoch();
  opened.samples_per_epoch = s.samples_per_epoch();
  opened.fingerprint = s.fingerprint();
  return opened;
}

void DaemonService::CloseStream(uint64_t id) { deps_.streams->Close(id); }

Result<std::unique_ptr<JobMembership>> DaemonService::JoinJob(const std::string& job) {
  EMBER_RETURN_IF_ERROR(CheckJobName(job));
  return std::unique_ptr<JobMembership>(new JobMembership(*this, job));
}

int DaemonService::JobMembers(const std::string& job) const {
  auto it = members_.find(job);
  return it == members_.end() ? 0 : it->second;
}

void DaemonService::Leave(const std::string& job) {
  auto it = members_.find(job);
  if (it == members_.end()) return;
  if (--it->second > 0) return;
  members_.erase(it);
  deps_.kv->DropJob(job);
}

DaemonStatus DaemonService::GetStatus() const {
  DaemonStatus status;
  status.version = deps_.version;
  status.pid = deps_.pid;
  status.uptime_seconds = (deps_.env->NowMicros() - start_micros_) / 1e6;
  status.datasets = deps_.catalog->List();
  status.jobs = deps_.ledger->Summaries();
  if (deps_.proxied_jobs) {
    std::vector<JobSummary> proxied = deps_.proxied_jobs();
    status.jobs.insert(status.jobs.end(), proxied.begin(), proxied.end());
  }
  status.streams = deps_.streams->Stats();
  status.shm_bytes_in_use = deps_.streams->shm_bytes_in_use();
  status.shm_bytes_budget = deps_.streams->shm_bytes_budget();
  status.pending_segments = deps_.segments->Pending();
  Result<ProcessStats> process = ReadProcessStats(*deps_.env);
  if (process.ok()) status.process = *process;
  return status;
}

}  // namespace ember::daemon
