#include "daemon/data/parquet/row_group_cache.h"

#include <optional>
#include <utility>

namespace ember::daemon {

uint64_t DecodedRowGroup::bytes() const {
  uint64_t total = sizeof(*this);
  for (const ParquetValues& column : columns) total += sizeof(column) + column.bytes();
  return total;
}

Result<RowGroupCache::RowGroup> RowGroupCache::Get(uint64_t key, const Decode& decode) {
  MutexLock lock(&mu_);
  if (auto it = slots_.find(key); it != slots_.end()) {
    const std::shared_ptr<Slot> slot = it->second;  // kept if evicted meanwhile
    slot->last_use = ++clock_;
    ++stats_.hits;
    while (!slot->ready) decoded_.Wait(&mu_);
    if (!slot->status.ok()) return slot->status;
    return slot->value;
  }
  const auto slot = std::make_shared<Slot>();
  slot->last_use = ++clock_;
  slots_[key] = slot;
  ++stats_.decodes;
  std::optional<Result<DecodedRowGroup>> decoded;
  {
    MutexUnlock unlock(&mu_);
    decoded.emplace(decode());
  }
  slot->ready = true;
  if (decoded->ok()) {
    slot->value = std::make_shared<const DecodedRowGroup>(std::move(*decoded).value());
    slot->bytes = slot->value->bytes();
  } else {
    slot->status = decoded->status();
    slot->bytes = sizeof(Slot) + slot->status.message().size();
  }
  stats_.bytes += slot->bytes;
  Evict(key);
  decoded_.SignalAll();
  if (!slot->status.ok()) return slot->status;
  return slot->value;
}

void RowGroupCache::Evict(uint64_t keep) {
  while (stats_.bytes > budget_) {
    auto victim = slots_.end();
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      if (it->first == keep || !it->second->ready) continue;
      if (victim == slots_.end() || it->second->last_use < victim->second->last_use) victim = it;
    }
    if (victim == slots_.end()) return;
    stats_.bytes -= victim->second->bytes;
    ++stats_.evictions;
    slots_.erase(victim);
  }
}

RowGroupCacheStats RowGroupCache::stats() const {
  MutexLock lock(&mu_);
  RowGroupCacheStats stats = stats_;
  stats.entries = slots_.size();
  return stats;
}

}  // namespace ember::daemon
