// KvStore: the rendezvous store and barriers, per job, used by trainers to bootstrap
// Gloo / NCCL through the daemon (no extra port to configure).
//
// Transport-free and callback-based so that RPC adapters can wait without blocking a
// thread: a Get on a missing key registers a callback that runs when a Set (or Add)
// creates the key. Timeouts belong to the caller (it calls CancelWaiter).
// Thread-safety: NOT thread-safe; the daemon calls it only from its RPC event-loop
// thread. Callbacks run synchronously inside Set/Add/Arrive on that thread.
#ifndef EMBER_DAEMON_COORDINATOR_KV_STORE_H_
#define EMBER_DAEMON_COORDINATOR_KV_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ember/status.h"

namespace ember::daemon {

// What one job may hold, so that no client grows the daemon without bound. Past a limit
// the call fails with kResourceExhausted naming the job, the limit and the size.
struct KvLimits {
  size_t max_key_bytes = 1024;                 // keys and barrier names
  size_t max_value_bytes = size_t{1} << 20;    // one value
  size_t max_job_bytes = size_t{16} << 20;     // all keys and values of a job
  size_t max_job_keys = 16384;
  size_t max_job_waiters = 4096;               // pending Gets and barrier arrivals
  size_t max_job_barriers = 1024;              // barrier names (each remembers its rounds)
};

class KvStore {
 public:
  using WaiterId = uint64_t;
  using ValueCallback = std::function<void(const std::string& value)>;
  using DoneCallback = std::function<void(uint64_t round)>;  // the round that completed

  explicit KvStore(KvLimits limits = {}) : limits_(limits) {}

  // Stores the value (replacing any). kResourceExhausted past a limit; nothing changes then.
  Status Set(const std::string& job, const std::string& key, std::string value);

  // Runs `on_value` now if the key exists (returns nullopt), else later (returns an id
  // for CancelWaiter). kResourceExhausted for a key too long or too many waiters.
  Result<std::optional<WaiterId>> Get(const std::string& job, const std::string& key,
                                      ValueCallback on_value);

  // Treats the value as a decimal int64 (missing = 0), adds delta, stores and returns it.
  // kInvalidArgument if the existing value is not an integer or the sum overflows int64,
  // kResourceExhausted past a limit; the stored value is then unchanged. Runs pending
  // Gets of the key like Set.
  Result<int64_t> Add(const std::string& job, const std::string& key, int64_t delta);

  bool Check(const std::string& job, const std::vector<std::string>& keys) const;
  bool Delete(const std::string& job, const std::string& key);

  // Barrier `name` of `job` for `world_size` participants: `on_done` runs for every
  // participant of a round once world_size have arrived, with the round's number (1, 2,
  // ... per name); the barrier then opens the next round (reusable).
  // The last arrival runs all callbacks (in arrival order, its own last) and gets nullopt;
  // earlier ones get an id for CancelWaiter.
  // `round` 0 arrives at the round now open. Round N (the caller saw round N - 1
  // complete) that already completed runs `on_done` at once (its answer was lost); a
  // round N past the open one means this store lost the earlier rounds (its daemon
  // restarted): they count as completed, and arrivals waiting with an explicit round
  // before N complete now. So members that re-send their arrival to a restarted
  // coordinator meet again, even if some passed the barrier before the restart.
  // `member` (0: anonymous) replaces that member's earlier arrival in the open round (its
  // callback is dropped unrun) instead of counting twice.
  // kInvalidArgument if world_size is 0 or differs from the one the current round was
  // opened with (a round opens with its first arrival and closes when it completes or
  // every participant has been cancelled); kResourceExhausted for a name too long, too
  // many waiters or too many barrier names.
  Result<std::optional<WaiterId>> Arrive(const std::string& job, const std::string& name,
                                         uint32_t world_size, uint64_t round,
                                         DoneCallback on_done, uint64_t member = 0);

  // Drops a pending Get or Arrive (after a timeout or a disconnect). A cancelled
  // barrier participant no longer counts as arrived. No-op for unknown ids.
  void CancelWaiter(WaiterId id);

  // Forgets everything about a job (when it ends). Its pending waiters are discarded
  // without being run.
  void DropJob(const std::string& job);

  size_t NumKeys(const std::string& job) const;

 private:
  struct Waiter {
    std::string job;
    std::string key;  // or barrier name
    bool barrier = false;
    uint64_t round = 0;   // a barrier arrival's, as it asked (0: the open one)
    uint64_t member = 0;  // a barrier arrival's member, 0: anonymous
    ValueCallback on_value;
    DoneCallback on_done;
  };
  struct Barrier {
    uint32_t world_size = 0;        // the open round's; 0 while nobody waits
    std::vector<WaiterId> arrived;  // in the open round, round completed + 1
    uint64_t completed = 0;         // rounds completed
  };
  // Completes the arrivals of `barrier` that asked for an explicit round up to its
  // completed one (after a jump, see Arrive).
  void ReleaseCompleted(Barrier& barrier);

  // Takes every pending Get of (job, key) off the waiter list, then runs them with the
  // key's current value.
  void FireGetters(const std::string& job, const std::string& key);

  // What a job holds now, against limits_.
  struct Usage {
    size_t bytes = 0;  // keys and values
    size_t waiters = 0;
  };
  // OK if `job` may store `key` = a value of `value_bytes` (replacing what it has).
  Status CheckStore(const std::string& job, const std::string& key, size_t value_bytes) const;
  // OK if `job` may add a waiter on `name` (a key or a barrier).
  Status CheckWaiter(const std::string& job, const std::string& what,
                     const std::string& name) const;
  // Stores and accounts for the value (checked). Does not fire getters.
  void Store(const std::string& job, const std::string& key, std::string value);
  void AddWaiter(WaiterId id, Waiter waiter);
  std::map<WaiterId, Waiter>::iterator EraseWaiter(std::map<WaiterId, Waiter>::iterator it);

  const KvLimits limits_;
  WaiterId next_id_ = 1;
  std::map<std::string, Usage> usage_;  // by job; entries for jobs holding something
  std::map<std::string, std::map<std::string, std::string>> values_;  // job -> key -> value
  std::map<WaiterId, Waiter> waiters_;
  std::map<std::pair<std::string, std::string>, Barrier> barriers_;   // (job, name)
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_KV_STORE_H_
