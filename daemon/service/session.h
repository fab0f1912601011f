// Session: what one client connection owns: its streams, its job memberships and who the
// peer is. Destroying the session closes its streams and ends its memberships, so a
// connection that drops (also a trainer that died without a word) leaves nothing behind.
//
// Thread-safety: NOT thread-safe; lives on the daemon's event-loop thread, as the
// DaemonService it uses (which must outlive it).
#ifndef EMBER_DAEMON_SERVICE_SESSION_H_
#define EMBER_DAEMON_SERVICE_SESSION_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "daemon/service/daemon_service.h"
#include "ember/status.h"

namespace ember::daemon {

class Session {
 public:
  // `peer`: the process at the other end, as the kernel reported it when it connected;
  // `principal`: who it is to the access rules (AccessPolicy::Identify of its
  // credentials, or AccessPolicy::Peer for another node's daemon).
  Session(DaemonService& service, PeerCredentials peer, Principal principal);
  ~Session();  // closes the session's streams, then ends its memberships
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Counts this session against its uid's connections (user_limits.connections);
  // kResourceExhausted past them. Released with the session.
  Status Admit();

  const PeerCredentials& peer() const { return peer_; }
  const Principal& principal() const { return principal_; }

  // The service's dataset calls, as this session's principal (files read with the
  // peer's credentials unless it is privileged). GetStatus names the session's jobs as
  // the session does. What they return shows datasets by the caller's names and their
  // paths as ShownPath does (URLs without credentials).
  void AddDataset(DatasetSpec spec, std::function<void(Result<DatasetInfo>)> done);
  std::vector<DatasetInfo> ListDatasets() const;
  Result<DatasetInfo> InspectDataset(const std::string& dataset) const;
  void RemoveDataset(std::string dataset, std::function<void(Status)> done);
  DaemonStatus GetStatus() const;
  Result<RegistrationProgress> GetRegistrationProgress(const std::string& dataset) const;
  Result<DatasetDetails> DescribeDataset(const std::string& dataset) const;
  Result<ShardCacheStatus> GetShardCache() const;
  Result<ShardCacheCleared> ClearShardCache();

  // A stream of this session's job params.job (see JoinJob), owned by this session until
  // CloseStream or the session's end (see DaemonService::OpenStream for the errors).
  Result<OpenedStream> OpenStream(const StreamParams& params);
  // No-op for ids this session does not own (or no longer: closing twice is fine).
  void CloseStream(uint64_t id);
  const std::set<uint64_t>& streams() const { return streams_; }

  // A membership in this session's job named `job` (JobKey: each uid names jobs in its
  // own scope), owned by this session until LeaveJob or the session's end; the pointer
  // stays valid until then. Joining a job twice gives two memberships. kInvalidArgument
  // for a bad name.
  Result<JobMembership*> JoinJob(const std::string& job);
  // JoinJob of the job keyed `key` as `principal`: for the session of another node's
  // daemon, joining a job for one of its ranks as that node identified the rank's
  // trainer (the node has scoped the name already).
  Result<JobMembership*> JoinJobAs(const std::string& key, const Principal& principal);
  // The key of this session's job named `job` (CheckJobName's errors for a bad name): what
  // the stores and the coordinators, here and on other nodes, know it by.
  Result<std::string> JobKey(const std::string& job) const;
  // No-op for a membership this session does not own.
  void LeaveJob(JobMembership* membership);
  size_t num_memberships() const { return memberships_.size(); }

 private:
  DaemonService& service_;
  const PeerCredentials peer_;
  const Principal principal_;
  bool admitted_ = false;
  std::set<uint64_t> streams_;
  std::map<JobMembership*, std::unique_ptr<JobMembership>> memberships_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVICE_SESSION_H_
