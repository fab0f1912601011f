// IndexingProgress: how far a format has got indexing a dataset's shards while the
// dataset is registered: the shards it listed, those indexed so far and their bytes. The
// format's indexing loop reports into it (webdataset, mds); the registering caller reads
// it from another thread (DaemonService's Registrations, emberctl dataset add). Formats
// without shards never report: their registration shows no shards.
//
// Thread-safe and lock-free: one writer (the probe), any number of readers; a reader may
// see shards_done and bytes_done of different moments (each is exact on its own).
#ifndef EMBER_DAEMON_CATALOG_INDEXING_PROGRESS_H_
#define EMBER_DAEMON_CATALOG_INDEXING_PROGRESS_H_

#include <atomic>
#include <cstdint>

namespace ember::daemon {

class IndexingProgress {
 public:
  // The dataset has `shards` shards to index (once listed).
  void SetShards(uint64_t shards) { shards_total_.store(shards, std::memory_order_relaxed); }
  // One more shard indexed, of `bytes` bytes.
  void ShardIndexed(uint64_t bytes) {
    bytes_done_.fetch_add(bytes, std::memory_order_relaxed);
    shards_done_.fetch_add(1, std::memory_order_relaxed);
  }

  uint64_t shards_total() const { return shards_total_.load(std::memory_order_relaxed); }
  uint64_t shards_done() const { return shards_done_.load(std::memory_order_relaxed); }
  uint64_t bytes_done() const { return bytes_done_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> shards_total_{0};
  std::atomic<uint64_t> shards_done_{0};
  std::atomic<uint64_t> bytes_done_{0};
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CATALOG_INDEXING_PROGRESS_H_
