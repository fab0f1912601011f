#include "daemon/service/session.h"

#include <utility>

#include "daemon/access/name_scope.h"
#include "daemon/coordinator/job_name.h"
#include "daemon/service/dataset_details.h"

namespace ember::daemon {

Session::Session(DaemonService& service, PeerCredentials peer, Principal principal)
    : service_(service), peer_(std::move(peer)), principal_(principal) {}

Session::~Session() {
  for (uint64_t id : streams_) service_.CloseStream(id);
  memberships_.clear();
  if (admitted_) service_.ReleaseConnection(principal_);
}

Status Session::Admit() {
  if (admitted_) return Status::Ok();
  EMBER_RETURN_IF_ERROR(service_.AdmitConnection(principal_));
  admitted_ = true;
  return Status::Ok();
}

namespace {

// `info` as `caller` names it, its path without credentials.
DatasetInfo Shown(const Principal& caller, DatasetInfo info) {
  info.spec.name = CallerName(caller, info.spec.name);
  info.spec.path = ShownPath(info.spec.path);
  return info;
}

}  // namespace

void Session::AddDataset(DatasetSpec spec, std::function<void(Result<DatasetInfo>)> done) {
  DatasetOwner owner;
  owner.principal = principal_;
  if (!principal_.privileged) owner.reads_as = peer_.creds;
  service_.AddDataset(std::move(spec), std::move(owner),
                      [caller = principal_, done = std::move(done)](Result<DatasetInfo> added) {
                        if (!added.ok()) return done(CallerNames(caller, added.status()));
                        done(Shown(caller, std::move(added).value()));
                      });
}

std::vector<DatasetInfo> Session::ListDatasets() const {
  std::vector<DatasetInfo> infos = service_.ListDatasets(principal_);
  for (DatasetInfo& info : infos) info = Shown(principal_, std::move(info));
  return infos;
}

Result<DatasetInfo> Session::InspectDataset(const std::string& dataset) const {
  EMBER_ASSIGN_OR_RETURN(DatasetInfo info, service_.FindDataset(principal_, dataset));
  return Shown(principal_, std::move(info));
}

void Session::RemoveDataset(std::string dataset, std::function<void(Status)> done) {
  service_.RemoveDataset(principal_, std::move(dataset),
                         [caller = principal_, done = std::move(done)](const Status& removed) {
                           done(CallerNames(caller, removed));
                         });
}

DaemonStatus Session::GetStatus() const {
  DaemonStatus status = service_.GetStatus(principal_);
  for (auto& dataset : status.datasets) {
    dataset.spec.name = CallerName(principal_, dataset.spec.name);
    dataset.spec.path = ShownPath(dataset.spec.path);
  }
  for (JobStatus& job : status.jobs) {
    job.job = CallerName(principal_, job.job);
    job.dataset = CallerName(principal_, job.dataset);
  }
  for (StreamStatus& stream : status.streams) {
    stream.job = CallerName(principal_, stream.job);
    stream.dataset = CallerName(principal_, stream.dataset);
    stream.share = CallerName(principal_, stream.share);
  }
  for (PendingSegmentStatus& segment : status.pending_segments)
    segment.job = CallerName(principal_, segment.job);
  return status;
}

Result<RegistrationProgress> Session::GetRegistrationProgress(const std::string& dataset) const {
  return service_.RegistrationProgressOf(principal_, dataset);
}

Result<DatasetDetails> Session::DescribeDataset(const std::string& dataset) const {
  EMBER_ASSIGN_OR_RETURN(DatasetDetails details, service_.DescribeDataset(principal_, dataset));
  details.info.spec.name = CallerName(principal_, details.info.spec.name);
  return details;
}

Result<ShardCacheStatus> Session::GetShardCache() const {
  EMBER_ASSIGN_OR_RETURN(ShardCacheStatus cache, service_.GetShardCache(principal_));
  for (ShardCacheEntry& entry : cache.listed)
    if (!entry.dataset.empty()) entry.dataset = CallerName(principal_, entry.dataset);
  return cache;
}

Result<ShardCacheCleared> Session::ClearShardCache() {
  return service_.ClearShardCache(principal_);
}

Result<std::string> Session::JobKey(const std::string& job) const {
  EMBER_RETURN_IF_ERROR(CheckJobName(job));
  return ::ember::daemon::ScopedKey(principal_, job);
}

Result<OpenedStream> Session::OpenStream(const StreamParams& params) {
  StreamParams own = params;
  own.owner = principal_;
  EMBER_ASSIGN_OR_RETURN(own.job, JobKey(params.job));
  own.dataset = service_.DatasetKeyFor(principal_, params.dataset);
  EMBER_ASSIGN_OR_RETURN(OpenedStream opened,
                         CallerNames(principal_, service_.OpenStream(own)));
  streams_.insert(opened.id);
  opened.share = params.share;  // as the caller named it
  return opened;
}

void Session::CloseStream(uint64_t id) {
  if (streams_.erase(id) > 0) service_.CloseStream(id);
}

Result<JobMembership*> Session::JoinJob(const std::string& job) {
  EMBER_ASSIGN_OR_RETURN(std::string key, JobKey(job));
  return CallerNames(principal_, JoinJobAs(key, principal_));
}

Result<JobMembership*> Session::JoinJobAs(const std::string& key, const Principal& principal) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<JobMembership> membership,
                         service_.JoinJob(principal, key));
  JobMembership* raw = membership.get();
  memberships_.emplace(raw, std::move(membership));
  return raw;
}

void Session::LeaveJob(JobMembership* membership) { memberships_.erase(membership); }

}  // namespace ember::daemon
