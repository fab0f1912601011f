// DaemonServer and JobServer: the Cap'n Proto shell around DaemonService
// (schemas/ember.capnp). They only translate params <-> the service's structs, Status <->
// kj exceptions and timeouts into the service's Wait::Expire; the logic lives in
// daemon/service.
//
// One DaemonServer per client connection, with that connection's Session: the Stream and
// Job capabilities it hands out share the session, which ends (closing its streams and
// memberships) when the connection drops and the last of them is gone.
// Thread-safety: lives on the RPC event-loop thread, like everything it touches there.
#ifndef EMBER_DAEMON_RPC_DAEMON_SERVER_H_
#define EMBER_DAEMON_RPC_DAEMON_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include <kj/timer.h>

#include "daemon/service/daemon_service.h"
#include "daemon/service/session.h"
#include "schemas/ember.capnp.h"

namespace ember::daemon {

// The Job capability of `job` at the daemon `coordinator` (HOST:PORT) names: nullptr when
// that is this daemon; kUnavailable / kFailedPrecondition when it cannot be reached.
// (kj::Maybe rather than std::optional: clang cannot instantiate std::optional of a
// capnp Client, whose copy constructor takes a non-const reference.)
using RemoteJobOpener = std::function<Result<kj::Maybe<rpc::Job::Client>>(
    const std::string& job, const std::string& coordinator, const Principal& caller)>;

class DaemonServer final : public rpc::Daemon::Server {
 public:
  // Serves one client's `session`. `timer` (not owned) must outlive the server and what it
  // hands out. `open_remote` (may be null: every job is local) serves joinJob with a
  // coordinator.
  DaemonServer(std::shared_ptr<Session> session, kj::Timer& timer,
               const RemoteJobOpener* open_remote = nullptr)
      : session_(std::move(session)), timer_(timer), open_remote_(open_remote) {}

 protected:
  kj::Promise<void> addDataset(AddDatasetContext context) override;
  kj::Promise<void> listDatasets(ListDatasetsContext context) override;
  kj::Promise<void> inspectDataset(InspectDatasetContext context) override;
  kj::Promise<void> removeDataset(RemoveDatasetContext context) override;
  kj::Promise<void> openStream(OpenStreamContext context) override;
  kj::Promise<void> status(StatusContext context) override;
  kj::Promise<void> joinJob(JoinJobContext context) override;
  kj::Promise<void> registrationProgress(RegistrationProgressContext context) override;
  kj::Promise<void> datasetDetails(DatasetDetailsContext context) override;
  kj::Promise<void> shardCache(ShardCacheContext context) override;
  kj::Promise<void> clearShardCache(ClearShardCacheContext context) override;

 private:
  std::shared_ptr<Session> session_;
  kj::Timer& timer_;
  const RemoteJobOpener* const open_remote_;
};

// A Job capability: one membership of the session. Releasing it ends the membership.
class JobServer final : public rpc::Job::Server {
 public:
  // `node_local`: false for a Job served to another node's daemon, whose ranks cannot share
  // this node's memory (openSharedMemory fails with failed_precondition).
  JobServer(std::shared_ptr<Session> session, JobMembership* membership, kj::Timer& timer,
            bool node_local = true)
      : session_(std::move(session)), membership_(*membership), timer_(timer),
        node_local_(node_local) {}
  ~JobServer();

 protected:
  kj::Promise<void> kvSet(KvSetContext context) override;
  kj::Promise<void> kvGet(KvGetContext context) override;
  kj::Promise<void> kvAdd(KvAddContext context) override;
  kj::Promise<void> kvCheck(KvCheckContext context) override;
  kj::Promise<void> kvDelete(KvDeleteContext context) override;
  kj::Promise<void> barrier(BarrierContext context) override;
  kj::Promise<void> incarnation(IncarnationContext context) override;
  kj::Promise<void> openSharedMemory(OpenSharedMemoryContext context) override;

 private:
  std::shared_ptr<Session> session_;
  JobMembership& membership_;  // owned by session_ until ~JobServer
  kj::Timer& timer_;
  const bool node_local_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_DAEMON_SERVER_H_
