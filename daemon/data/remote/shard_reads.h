// ShardReads: what a sharded source (webdataset, mds) does with its readers' forecasts
// for the shards it reads through the node's ShardCache. Its shards hold consecutive
// sample ids ([first[s], first[s + 1]) for shard s); the remote ones are read through
// the cache. It
//   - answers the cache's NextUse for its shards' URLs: the soonest batch in which any of
//     its readers (streams, ReadForecast) reads a sample of the shard (Belady's rule);
//   - prefetches, for each batch a reader starts, the batch's own shards and the first
//     kMissingAhead shards not in the cache that its next cache.prefetch_steps()
//     batches read, nearest first.
// Thread-safe. The cache must outlive it.
#ifndef EMBER_DAEMON_DATA_REMOTE_SHARD_READS_H_
#define EMBER_DAEMON_DATA_REMOTE_SHARD_READS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "daemon/data/read_forecast.h"
#include "daemon/data/remote/shard_cache.h"

namespace ember::daemon {

struct ShardSet {
  std::vector<std::string> urls;     // by shard
  std::vector<uint64_t> sizes;       // bytes, by shard
  std::vector<uint64_t> first;       // the shard's first sample id; size shards + 1
  std::vector<bool> remote;          // read through the cache (else local)
};

class ShardReads {
 public:
  // `cache` may be null when no shard is remote (then this does nothing).
  ShardReads(ShardSet shards, ShardCache* cache);

  void Follow(std::weak_ptr<const ReadForecast> reader);
  // The batch of `ids` is about to be read: prefetch its shards and the readers' next.
  void Prefetch(const uint64_t* ids, size_t count);

  // Shards not in the cache that a reader's next batches read, fetched ahead.
  static constexpr size_t kMissingAhead = ShardCache::kFetchThreads;

  // The shard holding sample `id` (< first.back()).
  uint32_t ShardOf(uint64_t id) const;

 private:
  std::optional<uint64_t> NextUse(const std::string& url);
  // Asks the cache for `shard` unless asked already or local; true if it was not cached.
  bool PrefetchShard(uint32_t shard, std::vector<bool>& asked);

  const ShardSet shards_;
  ShardCache* const cache_;
  std::unordered_map<std::string, uint32_t> by_url_;  // remote shards
  Mutex mu_;
  struct Reader {
    std::weak_ptr<const ReadForecast> forecast;
    uint64_t prefetched_at = UINT64_MAX;  // its Batches() when its upcoming were asked for
  };
  std::vector<Reader> readers_ GUARDED_BY(mu_);
  std::shared_ptr<void> registration_;  // with the cache: ends before the members above
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_REMOTE_SHARD_READS_H_
