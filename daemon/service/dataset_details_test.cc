#include "daemon/service/dataset_details.h"

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

DatasetInfo Remote(const std::string& name, const std::string& host, int shards) {
  DatasetInfo info;
  info.spec.name = name;
  info.spec.format = "webdataset";
  info.spec.path = "https://user:secret@" + host + "/d/s-{000..00" + std::to_string(shards - 1) +
                   "}.tar?sig=abc";
  for (int i = 0; i < shards; ++i)
    info.files.push_back("https://" + host + "/d/s-00" + std::to_string(i) + ".tar");
  info.shards = shards;
  info.index_bytes = 4096;
  info.count = 10;
  return info;
}

ShardCache::EntryInfo Entry(const std::string& url, uint64_t size, bool in_use = false) {
  return ShardCache::EntryInfo{url, size, in_use};
}

TEST_CASE("a path is shown as it is, a URL without credentials or query") {
  CHECK(ShownPath("/data/train") == "/data/train");
  CHECK(ShownPath("https://user:secret@host:8443/d/s-{0..9}.tar?X-Amz-Signature=abc") ==
        "https://host:8443/d/s-{0..9}.tar");
  CHECK(ShownPath("s3://bucket/prefix/") == "s3://bucket/prefix/");
}

TEST_CASE("a remote dataset's details count the shards the cache holds of it") {
  const DatasetInfo web = Remote("web", "a.example", 4);
  // Entries as fetched (credentials in the URL), one of another dataset.
  const std::vector<ShardCache::EntryInfo> cached = {
      Entry("https://user:secret@a.example/d/s-000.tar?sig=abc", 100),
      Entry("https://a.example/d/s-002.tar", 300, true),
      Entry("https://b.example/d/s-000.tar", 700)};
  const ::ember::DatasetDetails details = DetailsOf(web, cached);
  CHECK(details.info.spec.name == "web");
  CHECK(details.source == "https://a.example/d/s-{000..003}.tar");
  CHECK(details.info.spec.path == details.source);
  CHECK(details.shards == 4);
  CHECK(details.index_bytes == 4096);
  CHECK(details.remote);
  CHECK(details.shards_cached == 2);
  CHECK(details.bytes_cached == 400);

  DatasetInfo local;
  local.spec.path = "/data/shards";
  local.files = {"/data/shards/a.tar"};
  local.shards = 1;
  const ::ember::DatasetDetails here = DetailsOf(local, cached);
  CHECK(!here.remote);
  CHECK(here.shards_cached == 0);
  CHECK(here.source == "/data/shards");
}

TEST_CASE("the cache listing shows a caller the entries of its datasets, counts the rest") {
  ShardCacheStats stats;
  stats.hits = 5;
  stats.misses = 3;
  stats.fetched_bytes = 1100;
  stats.bytes = 1100;
  stats.entries = 3;
  const std::vector<ShardCache::EntryInfo> cached = {
      Entry("https://user:secret@a.example/d/s-000.tar?sig=abc", 100),
      Entry("https://a.example/d/s-002.tar", 300, true),
      Entry("https://b.example/d/s-000.tar", 700)};
  const std::vector<DatasetInfo> readable = {Remote("~2001/web", "a.example", 4)};

  const ::ember::ShardCacheStatus mine = CacheStatusOf(stats, 1 << 20, cached, readable, false);
  CHECK(mine.limit_bytes == 1 << 20);
  CHECK(mine.hits == 5);
  CHECK(mine.misses == 3);
  CHECK(mine.bytes == 1100);
  REQUIRE(mine.listed.size() == 2);
  CHECK(mine.listed[0].url == "https://a.example/d/s-000.tar");
  CHECK(mine.listed[0].dataset == "~2001/web");
  CHECK(mine.listed[0].bytes == 100);
  CHECK(!mine.listed[0].in_use);
  CHECK(mine.listed[1].in_use);
  CHECK(mine.entries_unlisted == 1);
  CHECK(mine.bytes_unlisted == 700);

  const ::ember::ShardCacheStatus all = CacheStatusOf(stats, 1 << 20, cached, readable, true);
  REQUIRE(all.listed.size() == 3);
  CHECK(all.listed[2].url == "https://b.example/d/s-000.tar");
  CHECK(all.listed[2].dataset.empty());
  CHECK(all.entries_unlisted == 0);
}

TEST_CASE("the cache listing is bounded") {
  std::vector<ShardCache::EntryInfo> cached;
  for (uint32_t i = 0; i < kMaxCacheEntriesListed + 5; ++i)
    cached.push_back(Entry("http://h/s-" + std::to_string(i) + ".tar", 2));
  const ::ember::ShardCacheStatus all = CacheStatusOf({}, 0, cached, {}, true);
  CHECK(all.listed.size() == kMaxCacheEntriesListed);
  CHECK(all.entries_unlisted == 5);
  CHECK(all.bytes_unlisted == 10);
}

}  // namespace
}  // namespace ember::daemon
