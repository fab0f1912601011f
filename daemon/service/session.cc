#include "daemon/service/session.h"

#include <utility>

namespace ember::daemon {

Session::Session(DaemonService& service, PeerCredentials peer)
    : service_(service), peer_(peer) {}

Session::~Session() {
  for (uint64_t id : streams_) service_.CloseStream(id);
  memberships_.clear();
}

Result<OpenedStream> Session::OpenStream(const StreamParams& params) {
  EMBER_ASSIGN_OR_RETURN(OpenedStream opened, service_.OpenStream(params));
  streams_.insert(opened.id);
  return opened;
}

void Session::CloseStream(uint64_t id) {
  if (streams_.erase(id) > 0) service_.CloseStream(id);
}

Result<JobMembership*> Session::JoinJob(const std::string& job) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<JobMembership> membership, service_.JoinJob(job));
  JobMembership* raw = membership.get();
  memberships_.emplace(raw, std::move(membership));
  return raw;
}

void Session::LeaveJob(JobMembership* membership) { memberships_.erase(membership); }

}  // namespace ember::daemon
