#include "tools/emberctl/cache_command.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "tools/emberctl/dataset_command.h"

namespace ember::emberctl {

std::string RenderCache(const ShardCacheStatus& c) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "shard cache: %" PRIu64 " entries, %s of %s; %" PRIu64 " hits, %" PRIu64
                " misses (%s fetched), %" PRIu64 " range reads (%s), %" PRIu64
                " evicted, %" PRIu64 " damaged\n",
                c.entries, Bytes(c.bytes).c_str(), Bytes(c.limit_bytes).c_str(), c.hits,
                c.misses, Bytes(c.fetched_bytes).c_str(), c.range_reads,
                Bytes(c.range_bytes).c_str(), c.evictions, c.damaged);
  std::string out = line;
  if (!c.listed.empty()) {
    size_t width = 3;
    for (const ShardCacheEntry& e : c.listed) width = std::max(width, e.url.size());
    std::snprintf(line, sizeof(line), "\n%-*s %10s  %-6s  %s\n", static_cast<int>(width), "URL",
                  "SIZE", "IN USE", "DATASET");
    out += line;
    for (const ShardCacheEntry& e : c.listed) {
      out += e.url + std::string(width - e.url.size(), ' ');
      std::snprintf(line, sizeof(line), " %10s  %-6s  %s\n", Bytes(e.bytes).c_str(),
                    e.in_use ? "yes" : "no", e.dataset.empty() ? "-" : e.dataset.c_str());
      out += line;
    }
  }
  if (c.entries_unlisted > 0) {
    std::snprintf(line, sizeof(line),
                  "(%" PRIu64 " more entries, %s, of datasets not yours, or past the listing's "
                  "limit)\n",
                  c.entries_unlisted, Bytes(c.bytes_unlisted).c_str());
    out += line;
  }
  return out;
}

std::string RenderCleared(const ShardCacheCleared& cleared) {
  std::string out = "cleared " + std::to_string(cleared.entries) + " entries (" +
                    Bytes(cleared.bytes) + ")";
  if (cleared.in_use > 0) out += "; kept " + std::to_string(cleared.in_use) + " in use";
  return out + "\n";
}

}  // namespace ember::emberctl
