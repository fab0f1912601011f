#include "daemon/service/dataset_details.h"

#include <map>
#include <utility>

#include "daemon/data/remote/http_fetch.h"

namespace ember::daemon {
namespace {

bool IsUrl(const std::string& path) { return path.find("://") != std::string::npos; }

}  // namespace

std::string ShownPath(const std::string& path) { return IsUrl(path) ? RedactUrl(path) : path; }

::ember::DatasetDetails DetailsOf(const DatasetInfo& info,
                                  const std::vector<ShardCache::EntryInfo>& cached) {
  ::ember::DatasetDetails details;
  details.info = PublicInfo(info);
  details.info.spec.path = ShownPath(info.spec.path);
  details.source = details.info.spec.path;
  details.shards = info.shards;
  details.index_bytes = info.index_bytes;
  std::map<std::string, uint64_t> files;  // the remote ones (as kept: without credentials)
  for (const std::string& file : info.files)
    if (IsUrl(file)) files.emplace(file, 0);
  details.remote = !files.empty();
  for (const ShardCache::EntryInfo& entry : cached) {
    auto it = files.find(RedactUrl(entry.url));
    if (it == files.end() || it->second != 0) continue;  // (two URLs alike but the query)
    it->second = entry.size;
    ++details.shards_cached;
    details.bytes_cached += entry.size;
  }
  return details;
}

::ember::ShardCacheStatus CacheStatusOf(const ShardCacheStats& stats, uint64_t limit,
                                        const std::vector<ShardCache::EntryInfo>& cached,
                                        const std::vector<DatasetInfo>& readable, bool all) {
  ::ember::ShardCacheStatus out;
  out.limit_bytes = limit;
  out.bytes = stats.bytes;
  out.entries = stats.entries;
  out.hits = stats.hits;
  out.misses = stats.misses;
  out.fetched_bytes = stats.fetched_bytes;
  out.evictions = stats.evictions;
  out.damaged = stats.damaged;
  out.range_reads = stats.range_reads;
  out.range_bytes = stats.range_bytes;
  std::map<std::string, const std::string*> reader;  // a file's URL -> the first dataset's key
  for (const DatasetInfo& info : readable)
    for (const std::string& file : info.files)
      if (IsUrl(file)) reader.emplace(file, &info.spec.name);
  for (const ShardCache::EntryInfo& entry : cached) {
    ::ember::ShardCacheEntry shown;
    shown.url = RedactUrl(entry.url);
    auto it = reader.find(shown.url);
    if ((it == reader.end() && !all) || out.listed.size() >= kMaxCacheEntriesListed) {
      ++out.entries_unlisted;
      out.bytes_unlisted += entry.size;
      continue;
    }
    if (it != reader.end()) shown.dataset = *it->second;
    shown.bytes = entry.size;
    shown.in_use = entry.in_use;
    out.listed.push_back(std::move(shown));
  }
  return out;
}

}  // namespace ember::daemon
