// DatasetCache: loaded datasets shared by all streams that read them.
//
// Loading (file reads, gzip inflate) runs asynchronously on a Boost.Asio thread pool so
// that neither the RPC thread nor a stream's producer waits on I/O it did not ask for.
// A dataset stays loaded while any stream holds it, and is freed when the last one lets
// go. Thread-safety: all methods are safe to call concurrently.
#ifndef EMBER_DAEMON_DATA_DATASET_CACHE_H_
#define EMBER_DAEMON_DATA_DATASET_CACHE_H_

#include <future>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/thread_pool.hpp>

#include "common/mutex.h"
#include "daemon/catalog/dataset.h"
#include "daemon/data/dataset_memory.h"
#include "common/env.h"
#include "daemon/data/formats.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

class DatasetCache {
 public:
  using SourceFuture = std::shared_future<Result<std::shared_ptr<const Source>>>;

  // `io_threads` threads load datasets with `deps` (plugin formats, the shard cache);
  // `memory` (may be null) is charged, in each dataset's owner's name, with what a loaded
  // dataset holds, for as long as it is loaded. They must outlive the cache.
  DatasetCache(Env* env, unsigned io_threads, const FormatDeps& deps = {},
               DatasetMemory* memory = nullptr);
  ~DatasetCache();  // waits for loads in flight

  // The loaded dataset, or a future that becomes ready when it is. Concurrent requests for
  // the same dataset share one load. A failed load is not cached.
  SourceFuture Get(const DatasetInfo& info);

  // Number of datasets currently held in memory.
  size_t NumLoaded() const;

 private:
  struct Entry {
    std::weak_ptr<const Source> loaded;
    SourceFuture pending;
  };

  Env* env_;
  const FormatDeps deps_;
  DatasetMemory* const memory_;
  boost::asio::thread_pool pool_;
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);  // by Key(spec)
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_DATASET_CACHE_H_
