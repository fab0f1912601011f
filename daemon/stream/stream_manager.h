// StreamManager: opens and closes streams, enforcing the shared-memory budget, and
// reports on them. The RPC layer is a thin shell around it.
// Thread-safety: all methods are safe to call concurrently.
#ifndef EMBER_DAEMON_STREAM_STREAM_MANAGER_H_
#define EMBER_DAEMON_STREAM_STREAM_MANAGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "daemon/catalog/catalog.h"
#include "daemon/coordinator/job_ledger.h"
#include "common/env.h"
#include "daemon/data/dataset_cache.h"
#include "daemon/stream/stream.h"
#include "ember/status.h"

namespace ember::daemon {

struct StreamLimits {
  uint64_t shm_budget_bytes = 4ull << 30;
  uint32_t default_slots = 8;
  uint32_t max_slots = 1024;
  uint32_t max_batch_size = 1 << 20;
};

class StreamManager {
 public:
  StreamManager(Env* env, Catalog* catalog, JobLedger* ledger, DatasetCache* cache,
                DecodePool* decode_pool, StreamLimits limits);
  ~StreamManager();  // closes every stream

  // Validates the request (naming the bad field), looks the dataset up in the catalog,
  // reserves ring memory from the budget (kResourceExhausted with the numbers if it does
  // not fit) and starts the stream. `params.slots == 0` means the default depth.
  Result<std::shared_ptr<Stream>> Open(StreamParams params);

  // Stops and frees a stream; its budget returns. No-op for unknown ids.
  void Close(uint64_t id);

  std::vector<StreamStats> Stats() const;
  uint64_t shm_bytes_in_use() const;
  uint64_t shm_bytes_budget() const { return limits_.shm_budget_bytes; }

 private:
  Env* env_;
  Catalog* catalog_;
  JobLedger* ledger_;
  DatasetCache* cache_;
  DecodePool* decode_pool_;
  const StreamLimits limits_;
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;                                  // guarded by mu_
  uint64_t reserved_bytes_ = 0;                           // guarded by mu_
  std::map<uint64_t, std::shared_ptr<Stream>> streams_;  // guarded by mu_
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_STREAM_STREAM_MANAGER_H_
