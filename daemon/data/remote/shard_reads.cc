#include "daemon/data/remote/shard_reads.h"

#include <algorithm>

namespace ember::daemon {

uint64_t MedianShardSamples(const std::vector<uint64_t>& first) {
  if (first.size() < 2) return 0;
  std::vector<uint64_t> counts;
  for (size_t s = 0; s + 1 < first.size(); ++s) counts.push_back(first[s + 1] - first[s]);
  std::nth_element(counts.begin(), counts.begin() + counts.size() / 2, counts.end());
  return std::max<uint64_t>(counts[counts.size() / 2], 1);
}

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

void ShardReads::PrefetchShard(uint32_t shard, std::vector<bool>& asked) {
  if (!shards_.remote[shard] || asked[shard]) return;
  asked[shard] = true;
  cache_->Prefetch(shards_.urls[shard], shards_.sizes[shard]);
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
  const uint32_t steps = cache_->prefetch_steps();
  for (const auto& forecast : due)
    for (uint64_t id : forecast->Upcoming(steps))
      if (id < shards_.first.back()) PrefetchShard(ShardOf(id), asked);
}

}  // namespace ember::daemon
