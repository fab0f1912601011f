// StreamManager: opens and closes streams, enforcing the shared-memory budget, and
// reports on them. The RPC layer is a thin shell around it.
//
// Closing never waits for a producer (which may be inside a slow Source call): a reaper
// thread owned by the manager destroys closed streams once their producers have stopped,
// and only then returns their ring memory to the budget.
// Thread-safety: all methods are safe to call concurrently.
#ifndef EMBER_DAEMON_STREAM_STREAM_MANAGER_H_
#define EMBER_DAEMON_STREAM_STREAM_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "daemon/catalog/catalog.h"
#include "daemon/coordinator/job_coordinator.h"
#include "common/env.h"
#include "daemon/data/dataset_cache.h"
#include "daemon/stream/stream.h"
#include "ember/status.h"

namespace ember::daemon {

struct StreamLimits {
  uint64_t shm_budget_bytes = 4ull << 30;
  // The fraction of the budget the rings of one uid may hold (config shm_user_share), and
  // how many streams one uid may have open. Privileged principals count only against the
  // whole budget.
  double shm_user_share = 0.5;
  uint32_t max_streams_per_user = 256;
  uint32_t default_slots = 8;
  uint32_t max_slots = 1024;
  uint32_t max_batch_size = 1 << 20;
  uint32_t max_world_size = 65536;  // config max_world_size
  // A share group holds its members' rows for this many steps of the job that started
  // it (config share_window): a member further behind decodes its own batches.
  uint32_t share_window = 4;
};

class StreamManager {
 public:
  // Where a stream's samples come from: DatasetCache::Get in the daemon.
  using SourceLoader = std::function<DatasetCache::SourceFuture(const DatasetInfo&)>;
  // The coordinator of a stream whose StreamParams::coordinator names a daemon (HOST:PORT):
  // `local_coordinator` when that is this daemon, else a proxy to it (RemoteCoordinator).
  // Called on the thread that calls Open; the result must outlive the streams.
  using CoordinatorResolver = std::function<Result<JobCoordinator*>(const std::string& address)>;

  // Everything must outlive the manager. Streams read datasets from `cache`.
  StreamManager(Env* env, Catalog* catalog, JobCoordinator* local_coordinator,
                DatasetCache* cache, DecodePool* decode_pool, StreamLimits limits);
  // As above, with streams reading from what `load_source` returns (tests: fake sources).
  StreamManager(Env* env, Catalog* catalog, JobCoordinator* local_coordinator,
                SourceLoader load_source, DecodePool* decode_pool, StreamLimits limits);
  // Streams with a coordinator address go through `resolve` (set before the first Open;
  // without it such streams are refused with kFailedPrecondition).
  void set_coordinator_resolver(CoordinatorResolver resolve) { resolve_ = std::move(resolve); }
  // Streams opened from now on send parts of their batches to `remote` (config
  // decode_workers; it must outlive the streams).
  void set_remote_decoders(RemoteDecoders* remote) { remote_.store(remote); }

  // Closes every stream and waits for all their producers.
  ~StreamManager();

  // Validates the request (naming the bad field), looks the dataset up in the catalog,
  // reserves ring memory from the budget (kResourceExhausted with the numbers if it does
  // not fit) and starts the stream. `params.slots == 0` means the default depth.
  // Callers use the returned stream (its ring fd and geometry) until they Close it, and
  // drop it then: the manager destroys it off the caller's thread.
  Result<std::shared_ptr<Stream>> Open(StreamParams params);

  // Stops a stream and returns at once, never waiting for its producer: the stream
  // leaves Stats() and its rank leaves the job now (so it may open again at once); its
  // ring memory returns to the budget once the producer has stopped. No-op for unknown
  // ids.
  void Close(uint64_t id);

  std::vector<StreamStats> Stats() const;
  // What each remote decode worker (set_remote_decoders) has done, in config order;
  // empty without any.
  std::vector<DecodeWorkerStats> DecodeWorkers() const;
  // Ring bytes reserved by open streams and by closed ones whose producers still run.
  uint64_t shm_bytes_in_use() const;
  uint64_t shm_bytes_budget() const { return shm_budget_bytes_.load(); }

  // Live config changes (SIGHUP): the budget and default depth for streams opened from
  // now on. A budget below what is in use closes nothing; new streams wait for room.
  void SetBudget(uint64_t shm_budget_bytes, uint32_t default_slots);

  // Shutting down (SIGTERM): from now on Open fails kUnavailable "emberd is shutting
  // down: no new streams", and every stream's producer finishes the batch it is writing
  // (which the trainer may still read) and starts no other. Idempotent; returns at once.
  void BeginDrain();
  // Streams whose producer is writing a batch now; 0 once drained after BeginDrain.
  size_t BatchesInFlight() const;

 private:
  // Reserves a ring of `bytes` for `owner` (kResourceExhausted with the numbers past the
  // budget, the owner's share or its stream count); Unreserve gives it back.
  Status ReserveLocked(const Principal& owner, uint64_t bytes, const std::string& what)
      REQUIRES(mu_);
  void UnreserveLocked(const Principal& owner, uint64_t bytes) REQUIRES(mu_);

  // The stream's share group (params.share): the one open under that name for the
  // owner's uid (any uid's, for a shared dataset), or a new one whose rows are reserved
  // from the budget like a ring. kInvalidArgument naming the field if the group reads
  // another dataset, seed or shuffle.
  static constexpr size_t kMaxShareName = 64;
  Result<std::shared_ptr<ShareGroup>> JoinGroup(const StreamParams& params,
                                                const DatasetInfo& info);
  // Forgets groups whose last stream is gone, returning their bytes to the budget.
  void SweepGroupsLocked() REQUIRES(mu_);
  // The reaper thread: destroys closed streams as their producers finish, returning
  // their bytes to the budget; exits once shutting down with none left.
  void Reap();

  Env* env_;
  Catalog* catalog_;
  JobCoordinator* local_coordinator_;
  CoordinatorResolver resolve_;
  std::atomic<RemoteDecoders*> remote_{nullptr};
  const SourceLoader load_source_;
  DecodePool* decode_pool_;
  const StreamLimits limits_;  // its shm_budget_bytes and default_slots: the two below
  std::atomic<uint64_t> shm_budget_bytes_;
  std::atomic<uint32_t> default_slots_;
  mutable Mutex mu_;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  uint64_t reserved_bytes_ GUARDED_BY(mu_) = 0;
  struct UserUse {
    uint64_t bytes = 0;
    uint32_t streams = 0;  // open or closing
  };
  std::map<uid_t, UserUse> users_ GUARDED_BY(mu_);  // by the streams' owners' uid
  std::map<uint64_t, std::shared_ptr<Stream>> streams_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Stream>> closing_ GUARDED_BY(mu_);  // stopped, not yet reaped
  struct GroupEntry {
    std::weak_ptr<ShareGroup> group;
    uint64_t bytes = 0;
    Principal owner;
  };
  std::map<std::string, GroupEntry> groups_ GUARDED_BY(mu_);  // by "<uid or *>/<name>"
  bool shutting_down_ GUARDED_BY(mu_) = false;
  bool draining_ GUARDED_BY(mu_) = false;
  CondVar closing_cv_;            // closing_ or shutting_down_ changed
  std::thread reaper_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_STREAM_STREAM_MANAGER_H_
