// `emberctl cache` and `emberctl cache clear`: the node's shard cache.
//
// The listing: a line of totals (entries and bytes held of the limit, hits, misses and
// the bytes they fetched, range reads, evictions, damaged entries), then a row per entry
// the caller may see (by URL, credentials removed: size, whether a reader holds it, the
// dataset that reads it), then how many entries of other users' datasets were not listed.
#ifndef EMBER_TOOLS_EMBERCTL_CACHE_COMMAND_H_
#define EMBER_TOOLS_EMBERCTL_CACHE_COMMAND_H_

#include <string>

#include "ember/client.h"

namespace ember::emberctl {

std::string RenderCache(const ShardCacheStatus& cache);

// "cleared 3 entries (1.2 MiB); kept 1 in use".
std::string RenderCleared(const ShardCacheCleared& cleared);

}  // namespace ember::emberctl

#endif  // EMBER_TOOLS_EMBERCTL_CACHE_COMMAND_H_
