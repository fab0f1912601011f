// What `emberctl dataset inspect` and `emberctl cache` show beyond a DatasetInfo, made of
// the catalog's and the shard cache's own structs (the wire's, ember/daemon_status.h).
// Plain functions of their arguments; no transport, no locks.
#ifndef EMBER_DAEMON_SERVICE_DATASET_DETAILS_H_
#define EMBER_DAEMON_SERVICE_DATASET_DETAILS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/catalog/dataset.h"
#include "daemon/data/remote/shard_cache.h"
#include "ember/daemon_status.h"

namespace ember::daemon {

// A dataset's path as clients see it: a URL (anything with "://") without user, password
// or query (RedactUrl: credentials and signatures); a file path as it is.
std::string ShownPath(const std::string& path);

// PublicInfo(info) with its source (ShownPath), shards, index memory and, for a dataset
// whose files are URLs, those of them `cached` holds (ShardCache::Entries(), matched by
// their URLs without credentials, as the dataset's files are kept).
::ember::DatasetDetails DetailsOf(const DatasetInfo& info,
                                  const std::vector<ShardCache::EntryInfo>& cached);

// The cache as a caller sees it: `stats` and `limit` (the node's) as they are; of
// `cached`, the entries that the datasets in `readable` read, or every entry if `all`,
// each named with the first such dataset's key (empty: none), URLs without credentials,
// at most kMaxCacheEntriesListed; the entries not listed are counted.
::ember::ShardCacheStatus CacheStatusOf(const ShardCacheStats& stats, uint64_t limit,
                                        const std::vector<ShardCache::EntryInfo>& cached,
                                        const std::vector<DatasetInfo>& readable, bool all);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVICE_DATASET_DETAILS_H_
