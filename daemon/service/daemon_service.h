// DaemonService: the daemon's operations, free of any transport (in the manner of tf.data
// service's DataServiceDispatcherImpl behind its gRPC shell). daemon/rpc translates Cap'n
// Proto calls into these and the results back; a test calls them directly.
//
// Glossary
//   membership  a JobMembership: a claim on one job's key-value store, barriers and
//               shared-memory segments. A job's keys and barriers live while it has
//               members; the last one leaving drops them, so the name can be reused.
//   wait        a Wait: a KvGet or barrier arrival that has not completed yet.
//   session     what one connection owns (daemon/service/session.h).
//
// Timeouts: a wait takes timeout_ms. 0 does not wait (the call completes at once, with
// kDeadlineExceeded unless the key exists or the arrival completes the barrier); otherwise
// the caller arms its own timer and calls Wait::Expire when timeout_ms have passed, which
// completes the wait with kDeadlineExceeded naming the key or barrier and the timeout.
//
// Thread-safety: NOT thread-safe. Every method, and JobMembership's and Wait's, runs on the
// daemon's event-loop thread (the key-value store is single-threaded). AddDataset and
// RemoveDataset do their file work on the blocking pool and call `done` there; work they
// posted must end before the service is destroyed.
#ifndef EMBER_DAEMON_SERVICE_DAEMON_SERVICE_H_
#define EMBER_DAEMON_SERVICE_DAEMON_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "common/env.h"
#include "daemon/access/principal.h"
#include "daemon/access/user_limits.h"
#include "daemon/catalog/catalog.h"
#include "daemon/coordinator/job_ledger.h"
#include "daemon/coordinator/kv_store.h"
#include "daemon/coordinator/shared_segments.h"
#include "daemon/data/remote/shard_cache.h"
#include "daemon/service/registrations.h"
#include "daemon/stream/stream_manager.h"
#include "ember/daemon_status.h"
#include "ember/status.h"

namespace ember::daemon {

// The subsystems the service drives; none owned, all must outlive the service.
struct ServiceDeps {
  Env* env = nullptr;  // the clock for uptime
  const AccessPolicy* access = nullptr;  // null: root and the daemon's uid 0 are privileged
  UserLimits user_limits;                // datasets, jobs and connections per uid
  Catalog* catalog = nullptr;
  StreamManager* streams = nullptr;
  JobLedger* ledger = nullptr;
  KvStore* kv = nullptr;
  SharedSegments* segments = nullptr;
  ShardCache* shards = nullptr;  // the node's shard cache; null: none (its calls fail)
  boost::asio::thread_pool* blocking = nullptr;  // runs the calls that read files
  std::string version;
  uint32_t pid = 0;  // reported by Status
  // The jobs other nodes' daemons coordinate that this daemon's ranks are in (only those
  // ranks; JobSummary::coordinator set), for Status. Null: none. Called on the thread
  // that calls GetStatus.
  std::function<std::vector<JobSummary>(const OwnerFilter& include)> proxied_jobs;
};

// What the transport needs of a freshly opened stream.
struct OpenedStream {
  uint64_t id = 0;
  int ring_fd = -1;  // the stream's memfd, owned by the stream: dup it to pass it on
  // The share group's memfd that the ring's shared regions lie in, owned by the stream
  // (dup it to pass it on); -1 when the stream reads no group.
  int shared_fd = -1;
  std::string share;  // the share group (StreamParams::share); empty: none
  uint32_t start_epoch = 0;  // the epochs served, [start_epoch, epochs): StreamInfo's
  uint32_t epochs = 0;
  uint32_t slot_count = 0;
  uint64_t slot_size = 0;
  uint64_t ring_bytes = 0;
  uint64_t batches_per_epoch = 0;  // per rank
  uint64_t samples_per_epoch = 0;  // whole dataset
  uint64_t fingerprint = 0;        // the dataset's
};

// A pending KvGet or barrier arrival. Destroying it cancels the wait if it has not
// completed (its callback then never runs; a cancelled barrier arrival no longer counts).
class Wait {
 public:
  Wait(KvStore& kv, KvStore::WaiterId id, std::shared_ptr<bool> completed,
       std::function<void()> on_timeout);
  ~Wait();
  Wait(const Wait&) = delete;
  Wait& operator=(const Wait&) = delete;

  // The timeout passed: unless the wait completed, cancels it and runs its callback with
  // kDeadlineExceeded.
  void Expire();

 private:
  KvStore& kv_;
  const KvStore::WaiterId id_;
  std::shared_ptr<bool> completed_;  // shared with the callback the store holds
  std::function<void()> on_timeout_;
};

class DaemonService;

// One member of a job (DaemonService::JoinJob). Its methods act on that job only. The job's
// keys and barriers are dropped when its last membership is destroyed.
class JobMembership {
 public:
  ~JobMembership();
  JobMembership(const JobMembership&) = delete;
  JobMembership& operator=(const JobMembership&) = delete;

  const std::string& job() const { return job_; }  // its key (daemon/access/name_scope.h)
  std::string name() const;                        // the job's name, as the member gave it

  // kResourceExhausted past the store's limits (KvLimits), naming the job and the limit.
  Status KvSet(const std::string& key, std::string value);

  // Runs `done` with the key's value now if it exists (returns null), else when a KvSet or
  // KvAdd of this job creates it (returns the Wait, which the caller expires after
  // timeout_ms). timeout_ms 0: a missing key fails at once with kDeadlineExceeded.
  std::unique_ptr<Wait> KvGet(const std::string& key, uint32_t timeout_ms,
                              std::function<void(Result<std::string>)> done);

  // See KvStore::Add.
  Result<int64_t> KvAdd(const std::string& key, int64_t delta);
  bool KvCheck(const std::vector<std::string>& keys) const;
  bool KvDelete(const std::string& key);

  // Arrives at `barrier`'s `round` (0: the open one; see KvStore::Arrive) for `world_size`
  // participants. `done` runs with the round's number once world_size have arrived (now
  // if this is the last arrival or the round completed before: returns null), or at once
  // with kInvalidArgument / kResourceExhausted (see KvStore::Arrive). Otherwise returns
  // the Wait, as KvGet. timeout_ms 0: an arrival that does not complete the round fails
  // at once.
  // `member`: see KvStore::Arrive.
  std::unique_ptr<Wait> Barrier(const std::string& barrier, uint32_t world_size, uint64_t round,
                                uint32_t timeout_ms,
                                std::function<void(Result<uint64_t>)> done,
                                uint64_t member = 0);

  // The daemon's incarnation (DaemonService::incarnation).
  uint64_t incarnation() const;

  // See SharedSegments::Open (errors name the job and segment).
  Result<std::shared_ptr<SharedMemory>> OpenSharedMemory(const std::string& segment,
                                                         uint32_t rank, uint32_t world_size,
                                                         uint64_t bytes);

 private:
  friend class DaemonService;
  JobMembership(DaemonService& service, std::string job, const Principal& caller);

  // The Wait for a registered waiter (null if `id` is empty: the callback already ran),
  // expired at once when timeout_ms is 0.
  std::unique_ptr<Wait> MakeWait(std::optional<KvStore::WaiterId> id,
                                 std::shared_ptr<bool> completed, uint32_t timeout_ms,
                                 std::function<void()> on_timeout);

  DaemonService& service_;
  const std::string job_;
  const Principal caller_;
};

class DaemonService {
 public:
  explicit DaemonService(ServiceDeps deps);
  DaemonService(const DaemonService&) = delete;
  DaemonService& operator=(const DaemonService&) = delete;

  // The principal of a client with `creds` (ServiceDeps::access).
  Principal Identify(const Credentials& creds) const;

  // A connection of `caller` begins (Admit) or ends (Release). kResourceExhausted once a
  // non-privileged uid has user_limits.connections connections.
  Status AdmitConnection(const Principal& caller);
  void ReleaseConnection(const Principal& caller);

  // Datasets, keyed by name_scope's DatasetKey: the catalog, the streams and the status
  // hold keys; Session shows the caller its names. Add probes the files (read as
  // owner.reads_as) and Remove rewrites the catalog on the blocking pool; `done` runs
  // there with the result (see Catalog::Add / Remove for the errors). A caller lists,
  // inspects and streams the datasets it may read (MayRead) and removes those it may
  // access (MayAccess to the owner): kPermissionDenied naming the dataset and its owner
  // for a shared one, DatasetNotFound for another user's unshared one.
  void AddDataset(DatasetSpec spec, DatasetOwner owner,
                  std::function<void(Result<DatasetInfo>)> done);
  std::vector<DatasetInfo> ListDatasets(const Principal& caller) const;
  // What `caller` means by `dataset` (see name_scope.h): its own, else the common one of
  // that name if it may read it; DatasetNotFound otherwise, as for a name nobody has.
  Result<DatasetInfo> FindDataset(const Principal& caller, const std::string& dataset) const;
  // The key of FindDataset's dataset; the caller's ScopedKey if there is none (so that
  // what then fails names the caller's own name).
  std::string DatasetKeyFor(const Principal& caller, const std::string& dataset) const;
  void RemoveDataset(const Principal& caller, std::string dataset,
                     std::function<void(Status)> done);

  // How far `caller`'s registration of `dataset` (an AddDataset not done yet) has got:
  // see Registrations::Find (only the registering uid sees it; kNotFound otherwise).
  Result<::ember::RegistrationProgress> RegistrationProgressOf(
      const Principal& caller, const std::string& dataset) const;
  // FindDataset's dataset with its source, shards, index memory and what the shard cache
  // holds of it (dataset_details.h); FindDataset's errors.
  Result<::ember::DatasetDetails> DescribeDataset(const Principal& caller,
                                                  const std::string& dataset) const;

  // The node's shard cache as `caller` may see it (CacheStatusOf): the entries of the
  // datasets it may read (every entry for a privileged caller), keyed as ListDatasets'.
  // kFailedPrecondition if the daemon has no cache.
  Result<::ember::ShardCacheStatus> GetShardCache(const Principal& caller) const;
  // Removes the cache entries no reader holds (ShardCache::Clear). The cache is the
  // node's: kPermissionDenied unless `caller` is privileged (root, emberd's own uid).
  Result<::ember::ShardCacheCleared> ClearShardCache(const Principal& caller);

  // Starts a stream as params.owner (see StreamManager::Open; errors name the job and
  // rank). It runs until CloseStream; Session does that for a connection.
  // kPermissionDenied if the job belongs to a principal params.owner may not access.
  Result<OpenedStream> OpenStream(const StreamParams& params);
  void CloseStream(uint64_t id);  // no-op for unknown ids

  // A new member of `job`; the first member's principal owns the job's keys, barriers
  // and segments until the last one leaves. kInvalidArgument for a bad job name;
  // kPermissionDenied if the job (its members or its streams) belongs to a principal
  // `caller` may not access.
  Result<std::unique_ptr<JobMembership>> JoinJob(const Principal& caller, const std::string& job);

  // Members of `job` now (0 if none).
  int JobMembers(const std::string& job) const;

  // A random id drawn when the service was made: a member that finds another one after
  // joining again knows this daemon restarted (and lost the jobs' keys and barriers).
  uint64_t incarnation() const { return incarnation_; }

  // What `caller` may see: its datasets (and shared ones), jobs, streams and pending
  // segments; the totals (shared memory in use) are the daemon's. The wire's own struct
  // (ember/daemon_status.h), made of the subsystems' once, here.
  ::ember::DaemonStatus GetStatus(const Principal& caller) const;

 private:
  friend class JobMembership;
  void Leave(const std::string& job);
  // kPermissionDenied unless `caller` may access the job's owner: its members' or its
  // ledger entry's.
  Status CheckJobAccess(const Principal& caller, const std::string& job) const;
  // kResourceExhausted when `job` would be a new one for a non-privileged caller that
  // holds user_limits.jobs already: joined stores and ledger jobs (streams, journaled).
  Status CheckJobsLimit(const Principal& caller, const std::string& job) const;
  // The owner of `job`: its members', else its ledger entry's; null if neither.
  std::optional<Principal> JobOwner(const std::string& job) const;

  struct Members {
    Principal owner;  // the first member's
    int count = 0;
  };

  const ServiceDeps deps_;
  const uint64_t start_micros_;
  const uint64_t incarnation_;
  // Registrations in progress (AddDataset); their records end on the blocking pool (and
  // keep the table alive until they do).
  std::shared_ptr<Registrations> registrations_;
  std::map<std::string, Members> members_;  // by job: its live memberships
  std::map<uid_t, uint32_t> connections_;   // of non-privileged uids
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVICE_DAEMON_SERVICE_H_
