#include "daemon/service/session.h"

#include <utility>

#include "daemon/access/job_scope.h"
#include "daemon/coordinator/job_name.h"

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

void Session::AddDataset(DatasetSpec spec, std::function<void(Result<DatasetInfo>)> done) {
  DatasetOwner owner;
  owner.principal = principal_;
  if (!principal_.privileged) owner.reads_as = peer_.creds;
  service_.AddDataset(std::move(spec), std::move(owner), std::move(done));
}

std::vector<DatasetInfo> Session::ListDatasets() const { return service_.ListDatasets(principal_); }

Result<DatasetInfo> Session::InspectDataset(const std::string& dataset) const {
  return service_.InspectDataset(principal_, dataset);
}

void Session::RemoveDataset(std::string dataset, std::function<void(Status)> done) {
  service_.RemoveDataset(principal_, std::move(dataset), std::move(done));
}

DaemonStatus Session::GetStatus() const {
  DaemonStatus status = service_.GetStatus(principal_);
  for (JobStatus& job : status.jobs) job.job = CallerJobName(principal_, job.job);
  for (StreamStatus& stream : status.streams) stream.job = CallerJobName(principal_, stream.job);
  for (PendingSegmentStatus& segment : status.pending_segments)
    segment.job = CallerJobName(principal_, segment.job);
  return status;
}

Result<std::string> Session::JobKey(const std::string& job) const {
  EMBER_RETURN_IF_ERROR(CheckJobName(job));
  return ::ember::daemon::JobKey(principal_, job);
}

Result<OpenedStream> Session::OpenStream(const StreamParams& params) {
  StreamParams own = params;
  own.owner = principal_;
  EMBER_ASSIGN_OR_RETURN(own.job, JobKey(params.job));
  EMBER_ASSIGN_OR_RETURN(OpenedStream opened,
                         CallerJobNames(principal_, service_.OpenStream(own)));
  streams_.insert(opened.id);
  return opened;
}

void Session::CloseStream(uint64_t id) {
  if (streams_.erase(id) > 0) service_.CloseStream(id);
}

Result<JobMembership*> Session::JoinJob(const std::string& job) {
  EMBER_ASSIGN_OR_RETURN(std::string key, JobKey(job));
  return CallerJobNames(principal_, JoinJobAs(key, principal_));
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
