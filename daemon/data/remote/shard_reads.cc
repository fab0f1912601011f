#include "daemon/data/remote/shard_reads.h"

#include <algorithm>

namespace ember::daemon {

ShardReads::ShardReads(ShardSet shards, ShardCache* cache)
    : shards_(std::move(shards)), cache_(cache) {
  if (cache_ == nullptr) return;
  for (uint32_t s = 0; s < shards_.urls.size(); ++s)
    if (shards_.remote[s]) by_url_.emplace(shards_.urls[s], s);
  if (!by_url_.empty())
    registration_ = cache_->AddNextUse([this](const std::string& url) { return NextUse(url); });
}

uint32_t ShardReads::ShardOf(uint64_t id) const {
  return static_cast<uint32_t>(
      std::upper_bound(shards_.first.begin(), shards_.first.end(), id) - shards_.first.begin() - 1);
}

void ShardReads::Follow(std::weak_ptr<const ReadForecast> reader) {
  if (by_url_.empty()) return;
  MutexLock lock(&mu_);
  readers_.erase(std::remove_if(readers_.begin(), readers_.end(),
                                [](const Reader& r) { return r.forecast.expired(); }),
                 readers_.end());
  readers_.push_back(Reader{std::move(reader)});
}

std::optional<uint64_t> ShardReads::NextUse(const std::string& url) {
  auto it = by_url_.find(url);
  if (it == by_url_.end()) return std::nullopt;
  const uint32_t s = it->second;
  std::vector<std::shared_ptr<const ReadForecast>> readers;
  {
    MutexLock lock(&mu_);
    for (const Reader& r : readers_)
      if (auto forecast = r.forecast.lock()) readers.push_back(std::move(forecast));
  }
  std::optional<uint64_t> soonest;
  for (const auto& forecast : readers) {
    const std::optional<uint64_t> next = forecast->NextRead(shards_.first[s], shards_.first[s + 1]);
    if (next && (!soonest || *next < *soonest)) soonest = next;
  }
  return soonest;
}

bool ShardReads::PrefetchShard(uint32_t shard, std::vector<bool>& asked) {
  if (!shards_.remote[shard] || asked[shard]) return false;
  asked[shard] = true;
  if (cache_->Contains(shards_.urls[shard])) return false;
  cache_->Prefetch(shards_.urls[shard], shards_.sizes[shard]);
  return true;
}

void ShardReads::Prefetch(const uint64_t* ids, size_t count) {
  if (by_url_.empty()) return;
  std::vector<bool> asked(shards_.urls.size(), false);
  for (size_t i = 0; i < count; ++i)
    if (ids[i] < shards_.first.back()) PrefetchShard(ShardOf(ids[i]), asked);
  // The readers' next batches, for those that moved on since they were last asked.
  std::vector<std::shared_ptr<const ReadForecast>> due;
  {
    MutexLock lock(&mu_);
    for (Reader& r : readers_) {
      auto forecast = r.forecast.lock();
      if (forecast == nullptr) continue;
      const uint64_t batches = forecast->Batches();
      if (batches == r.prefetched_at) continue;
      r.prefetched_at = batches;
      due.push_back(std::move(forecast));
    }
  }
  // Of each reader's next batches, the first kMissingAhead shards not in the cache: a
  // shard fetched long before its use would push out one the next epoch reads sooner
  // than it would have been pushed out, and be fetched again (Belady's count holds for
  // fetches made when they are due; these come a few shards early, to hide latency).
  const uint32_t steps = cache_->prefetch_steps();
  for (const auto& forecast : due) {
    size_t missing = 0;
    for (uint64_t id : forecast->Upcoming(steps)) {
      if (id >= shards_.first.back()) continue;
      if (PrefetchShard(ShardOf(id), asked) && ++missing == kMissingAhead) break;
    }
  }
}

}  // namespace ember::daemon
