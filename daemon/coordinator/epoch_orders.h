// EpochOrders: epochs' sample orders (MakeEpochOrder's permutation, a pure function of
// (num_samples, seed, epoch, shuffle, shape)), kept for the leases that need their sample ids,
// and built ahead of time: once a lease reaches the second half of epoch e, the order of
// e + 1 is built on a background thread, so the next epoch's first lease finds it ready.
//
// Bounded: of one dataset order (num_samples, seed) at most kKeptPerOrder epochs' orders
// are held (the current and the next); adding another drops the one farthest from it (a
// rank still in that epoch has it built again). At most kKeptInAll are held in all (the
// least recently used goes first), and an order unused for `idle` is dropped. An order
// takes 4 bytes per sample (8 above 2^32 samples); without shuffle none is kept (the
// order is the identity).
//
// Thread-safety: safe from any thread. Ids blocks while the order it needs is built (on
// the caller's thread, or by the background thread): never call it on an event-loop
// thread.
#ifndef EMBER_DAEMON_COORDINATOR_EPOCH_ORDERS_H_
#define EMBER_DAEMON_COORDINATOR_EPOCH_ORDERS_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "daemon/coordinator/epoch_plan.h"

namespace ember::daemon {

// Which order: a job's dataset size, seed and shuffle setting.
struct OrderKey {
  uint64_t num_samples = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  ShuffleShape shape;
};

class EpochOrders {
 public:
  static constexpr size_t kKeptPerOrder = 2;
  static constexpr size_t kKeptInAll = 4;

  explicit EpochOrders(std::chrono::milliseconds idle = std::chrono::minutes(2))
      : idle_(idle) {}
  // Waits for a background build in progress (seconds for tens of millions of samples).
  ~EpochOrders();
  EpochOrders(const EpochOrders&) = delete;
  EpochOrders& operator=(const EpochOrders&) = delete;

  // The sample ids at positions `range` of `epoch`'s order (range.end <= num_samples).
  std::vector<uint64_t> Ids(const OrderKey& key, uint64_t epoch, PositionRange range);

  // A rank's sample ids of a step: those at `slice` (its part of the step at `step`), or,
  // shuffled by shards, the step's grouped by shard (GroupByShard) and cut at the same
  // offsets. A `step` that does not hold `slice` (a lease of an older peer): Ids(slice).
  std::vector<uint64_t> SliceIds(const OrderKey& key, uint64_t epoch, PositionRange step,
                                 PositionRange slice);

  struct Stats {
    uint64_t built_here = 0;   // on a caller's thread: its lease waited for the order
    uint64_t built_ahead = 0;  // on the background thread
    size_t held = 0;           // orders held now
  };
  Stats stats() const;
  // Waits until no background build is queued or running (tests).
  void WaitIdle();

 private:
  struct Order {
    std::vector<uint32_t> narrow;  // num_samples <= 2^32
    std::vector<uint64_t> wide;    // else
    uint64_t at(uint64_t i) const { return narrow.empty() ? wide[i] : narrow[i]; }
  };
  struct Slot {
    std::shared_ptr<const Order> order;  // null while it is being built
    std::chrono::steady_clock::time_point used;
  };
  using Stream = std::tuple<uint64_t, uint64_t, ShuffleShape>;  // (num_samples, seed, shape)
  using Epochs = std::map<uint64_t, Slot>;

  static std::shared_ptr<const Order> Build(const Stream& stream, uint64_t epoch);
  // Adds an empty slot for `epoch`, first dropping orders past the bounds.
  void Reserve(const Stream& stream, uint64_t epoch) REQUIRES(mu_);
  // The built order into its slot, waking its waiters.
  void Publish(const Stream& stream, uint64_t epoch, std::shared_ptr<const Order> order)
      REQUIRES(mu_);
  // Drops orders unused for idle_.
  void DropIdle(std::chrono::steady_clock::time_point now) REQUIRES(mu_);
  size_t HeldLocked() const REQUIRES(mu_);
  void Work();

  const std::chrono::milliseconds idle_;
  mutable Mutex mu_;
  CondVar changed_;                  // built, queued, stopping
  std::map<Stream, Epochs> streams_ GUARDED_BY(mu_);
  std::deque<std::pair<Stream, uint64_t>> queue_ GUARDED_BY(mu_);  // background builds
  bool working_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  Stats stats_ GUARDED_BY(mu_);  // but held, which stats() counts
  std::thread worker_;                               // started with the first slot
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_EPOCH_ORDERS_H_
