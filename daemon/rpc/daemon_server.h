// DaemonServer: the Cap'n Proto shell around the daemon's core (schemas/ember.capnp).
// It only translates params <-> core structs and Status <-> kj exceptions; the logic
// lives in daemon/catalog, daemon/coordinator and daemon/stream.
//
// One DaemonServer per client connection, so that what a connection holds (its streams,
// its claim on a job's key-value store) is released when the connection drops, also
// when the trainer died without a word.
// Thread-safety: lives on the RPC event-loop thread, like everything it touches there.
#ifndef EMBER_DAEMON_RPC_DAEMON_SERVER_H_
#define EMBER_DAEMON_RPC_DAEMON_SERVER_H_

#include <map>
#include <set>
#include <string>

#include <boost/asio/thread_pool.hpp>
#include <kj/timer.h>

#include "daemon/catalog/catalog.h"
#include "daemon/coordinator/job_ledger.h"
#include "daemon/coordinator/kv_store.h"
#include "daemon/coordinator/shared_segments.h"
#include "daemon/stream/stream_manager.h"
#include "schemas/ember.capnp.h"

namespace ember::daemon {

// What every connection's server shares. Owned by main(); outlives all servers.
struct ServerContext {
  Catalog* catalog = nullptr;
  StreamManager* streams = nullptr;
  JobLedger* ledger = nullptr;
  KvStore* kv = nullptr;
  SharedSegments* segments = nullptr;
  kj::Timer* timer = nullptr;
  boost::asio::thread_pool* blocking = nullptr;  // for calls that read files
  Env* env = nullptr;
  uint64_t start_micros = 0;
  std::string version;
  // Number of live connections that used each job's key-value store; the job's keys are
  // dropped when it falls to zero, so a job name can be reused by a later run.
  std::map<std::string, int> kv_job_refs;
};

class DaemonServer final : public rpc::Daemon::Server {
 public:
  explicit DaemonServer(ServerContext& context) : ctx_(context) {}
  ~DaemonServer();

 protected:
  kj::Promise<void> addDataset(AddDatasetContext context) override;
  kj::Promise<void> listDatasets(ListDatasetsContext context) override;
  kj::Promise<void> inspectDataset(InspectDatasetContext context) override;
  kj::Promise<void> removeDataset(RemoveDatasetContext context) override;
  kj::Promise<void> openStream(OpenStreamContext context) override;
  kj::Promise<void> kvSet(KvSetContext context) override;
  kj::Promise<void> kvGet(KvGetContext context) override;
  kj::Promise<void> kvAdd(KvAddContext context) override;
  kj::Promise<void> kvCheck(KvCheckContext context) override;
  kj::Promise<void> kvDelete(KvDeleteContext context) override;
  kj::Promise<void> barrier(BarrierContext context) override;
  kj::Promise<void> status(StatusContext context) override;
  kj::Promise<void> openSharedMemory(OpenSharedMemoryContext context) override;

 private:
  void UseJob(const std::string& job);

  ServerContext& ctx_;
  std::set<std::string> kv_jobs_;  // jobs this connection counted in ctx_.kv_job_refs
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_DAEMON_SERVER_H_
