// RowGroupCache: the decoded row groups of one parquet source (parquet.h), so that the rows
// of a row group, read one by one by the decode threads (in file order, or close to it
// under a shuffle by shards), decode it once. A row group read while another thread
// decodes it waits for that decode. A failed decode is kept like a row group (each of its
// rows fails with it, without decoding again).
//
// Bounded by a byte budget: past it, the least recently used row groups go. A row group a
// reader still holds stays alive with that reader: the budget bounds what the cache keeps;
// what emberd holds is that plus the row groups its decode threads are reading now (one
// each at most). The budget may be less than one row group: then it keeps the last one.
//
// Thread-safe.
#ifndef EMBER_DAEMON_DATA_PARQUET_ROW_GROUP_CACHE_H_
#define EMBER_DAEMON_DATA_PARQUET_ROW_GROUP_CACHE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "daemon/data/parquet/parquet_file.h"
#include "ember/status.h"

namespace ember::daemon {

// The columns a source reads of one row group, in its order.
struct DecodedRowGroup {
  std::vector<ParquetValues> columns;
  uint64_t bytes() const;
};

struct RowGroupCacheStats {
  uint64_t hits = 0;     // found decoded (or being decoded)
  uint64_t decodes = 0;  // decoded (misses)
  uint64_t evictions = 0;
  uint64_t bytes = 0;  // held now
  uint64_t entries = 0;
};

class RowGroupCache {
 public:
  using RowGroup = std::shared_ptr<const DecodedRowGroup>;
  using Decode = std::function<Result<DecodedRowGroup>()>;

  explicit RowGroupCache(uint64_t budget) : budget_(budget) {}

  // The row group `key` (a source's own numbering): cached, else decoded by `decode` on
  // this thread (without the cache's lock), or waited for if another thread decodes it.
  // `decode`'s error, also for the later readers of the row group while it is cached.
  Result<RowGroup> Get(uint64_t key, const Decode& decode);

  uint64_t budget() const { return budget_; }
  RowGroupCacheStats stats() const;

 private:
  struct Slot {
    bool ready = false;
    Status status;  // of the decode, once ready
    RowGroup value;
    uint64_t bytes = 0;
    uint64_t last_use = 0;
  };

  // Removes the least recently used ready slots but `keep` until the rest fit the budget.
  void Evict(uint64_t keep) REQUIRES(mu_);

  const uint64_t budget_;
  mutable Mutex mu_;
  CondVar decoded_;
  std::map<uint64_t, std::shared_ptr<Slot>> slots_ GUARDED_BY(mu_);
  uint64_t clock_ GUARDED_BY(mu_) = 0;
  RowGroupCacheStats stats_ GUARDED_BY(mu_);
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PARQUET_ROW_GROUP_CACHE_H_
