// StreamForecast: a stream's ReadForecast, computed from its job's plan: the rank's
// slices of the steps of its epoch and of the next one (epoch_plan.h), the sample ids
// through the epoch's order. Built when a source first asks (a source that reads
// remote storage; the others never do): then it holds the order of the current and the
// next epoch and their inverses, 16 bytes per sample (datasets over 2^32 samples get
// no forecast).
#ifndef EMBER_DAEMON_STREAM_STREAM_FORECAST_H_
#define EMBER_DAEMON_STREAM_STREAM_FORECAST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/mutex.h"
#include "daemon/coordinator/epoch_plan.h"
#include "daemon/coordinator/job_coordinator.h"
#include "daemon/data/read_forecast.h"

namespace ember::daemon {

class StreamForecast final : public ReadForecast {
 public:
  // Rank `rank` of the job with `params`, reading epochs below `end_epoch` (0: unbounded).
  StreamForecast(const JobParams& params, uint32_t rank, uint64_t end_epoch)
      : plan_(params), rank_(rank), end_epoch_(end_epoch) {}

  // The reader leased step `batch` of `epoch` (its current batch from now on).
  void Advance(uint64_t epoch, uint64_t batch);

  uint64_t Batches() const override;
  std::vector<uint64_t> Upcoming(uint64_t batches) const override;
  std::optional<uint64_t> NextRead(uint64_t begin, uint64_t end) const override;

 private:
  struct Epoch {
    uint64_t epoch = 0;
    StepLayout layout;
    std::vector<uint32_t> order;        // position -> sample id
    std::vector<uint32_t> position_of;  // sample id -> position
  };
  // The epoch's plan (one of the two kept), built if need be. Null if it has none (past
  // the end, or a layout the plan refuses).
  const Epoch* EpochLocked(uint64_t epoch) const REQUIRES(mu_);
  // The step of `e` holding `position` (nullopt: none, before a resumed epoch's start).
  std::optional<uint64_t> StepOf(const Epoch& e, uint64_t position) const;
  // The rank's sample ids of `step` of `e` (a step shuffled by shards grouped by shard
  // before it is cut: GroupByShard).
  std::vector<uint64_t> RankIds(const Epoch& e, uint64_t step) const;

  const JobParams plan_;
  const uint32_t rank_;
  const uint64_t end_epoch_;
  mutable Mutex mu_;
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  uint64_t batch_ GUARDED_BY(mu_) = 0;
  uint64_t batches_ GUARDED_BY(mu_) = 0;
  mutable std::unique_ptr<Epoch> kept_[2] GUARDED_BY(mu_);  // by epoch % 2
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_STREAM_STREAM_FORECAST_H_
