#include "daemon/stream/stream_forecast.h"

#include <algorithm>
#include <limits>
#include <map>

namespace ember::daemon {

void StreamForecast::Advance(uint64_t epoch, uint64_t batch) {
  MutexLock lock(&mu_);
  epoch_ = epoch;
  batch_ = batch;
  ++batches_;
}

uint64_t StreamForecast::Batches() const {
  MutexLock lock(&mu_);
  return batches_;
}

const StreamForecast::Epoch* StreamForecast::EpochLocked(uint64_t epoch) const {
  if (end_epoch_ != 0 && epoch >= end_epoch_) return nullptr;
  if (plan_.num_samples == 0 ||
      plan_.num_samples > uint64_t{std::numeric_limits<uint32_t>::max()} + 1)
    return nullptr;
  std::unique_ptr<Epoch>& slot = kept_[epoch % 2];
  if (slot != nullptr && slot->epoch == epoch) return slot.get();
  const uint64_t start = epoch == plan_.start_epoch ? plan_.start_position : 0;
  Result<StepLayout> layout =
      MakeStepLayout(plan_.num_samples, plan_.batch_size, plan_.world_size, start);
  if (!layout.ok()) return nullptr;
  auto built = std::make_unique<Epoch>();
  built->epoch = epoch;
  built->layout = std::move(layout).value();
  MakeEpochOrder(plan_.num_samples, plan_.seed, epoch, plan_.shuffle, &built->order, plan_.shuffle_shape);
  built->position_of.resize(plan_.num_samples);
  for (uint64_t p = 0; p < built->order.size(); ++p)
    built->position_of[built->order[p]] = static_cast<uint32_t>(p);
  slot = std::move(built);
  return slot.get();
}

std::optional<uint64_t> StreamForecast::StepOf(const Epoch& e, uint64_t position) const {
  const std::vector<uint64_t>& starts = e.layout.step_starts;
  if (starts.empty() || position < starts.front() || position >= starts.back()) return std::nullopt;
  return static_cast<uint64_t>(std::upper_bound(starts.begin(), starts.end(), position) -
                               starts.begin()) - 1;
}

std::vector<uint64_t> StreamForecast::RankIds(const Epoch& e, uint64_t step) const {
  const PositionRange slice = e.layout.Slice(step, rank_);
  if (!plan_.shuffle_shape.by_shards()) {
    return std::vector<uint64_t>(e.order.begin() + slice.begin, e.order.begin() + slice.end);
  }
  const uint64_t first = e.layout.step_starts[step];
  std::vector<uint64_t> ids(e.order.begin() + first, e.order.begin() + e.layout.step_starts[step + 1]);
  GroupByShard(ids, plan_.shuffle_shape);
  return std::vector<uint64_t>(ids.begin() + (slice.begin - first), ids.begin() + (slice.end - first));
}

std::vector<uint64_t> StreamForecast::Upcoming(uint64_t batches) const {
  std::vector<uint64_t> ids;
  MutexLock lock(&mu_);
  uint64_t epoch = epoch_, step = batch_ + 1;
  for (uint64_t taken = 0; taken < batches;) {
    const Epoch* e = EpochLocked(epoch);
    if (e == nullptr) break;
    for (; step < e->layout.steps() && taken < batches; ++step, ++taken) {
      const std::vector<uint64_t> step_ids = RankIds(*e, step);
      ids.insert(ids.end(), step_ids.begin(), step_ids.end());
    }
    ++epoch;
    step = 0;
  }
  return ids;
}

std::optional<uint64_t> StreamForecast::NextRead(uint64_t begin, uint64_t end) const {
  MutexLock lock(&mu_);
  end = std::min(end, plan_.num_samples);
  uint64_t offset = 0;  // batches from now to the start of the epoch looked at
  for (uint64_t epoch = epoch_; epoch <= epoch_ + 1; ++epoch) {
    const Epoch* e = EpochLocked(epoch);
    if (e == nullptr) return std::nullopt;
    const uint64_t first = epoch == epoch_ ? batch_ : 0;  // steps before it are read
    std::optional<uint64_t> soonest;
    std::map<uint64_t, std::vector<uint64_t>> rank_ids;  // by step: this rank's ids of it
    for (uint64_t id = begin; id < end; ++id) {
      const std::optional<uint64_t> step = StepOf(*e, e->position_of[id]);
      if (!step || *step < first || (soonest && *step >= *soonest)) continue;
      auto [it, added] = rank_ids.try_emplace(*step);
      if (added) {
        it->second = RankIds(*e, *step);
        std::sort(it->second.begin(), it->second.end());
      }
      if (std::binary_search(it->second.begin(), it->second.end(), id)) soonest = step;
    }
    if (soonest) return offset + (*soonest - first);
    offset += e->layout.steps() - first;
  }
  return std::nullopt;
}

}  // namespace ember::daemon
