// What `emberctl cache` and `emberctl cache clear` print.
#include "tools/emberctl/cache_command.h"

#include <catch2/catch.hpp>

#include <string>

namespace ember::emberctl {
namespace {

TEST_CASE("the cache listing: totals, the caller's entries, the others counted") {
  ShardCacheStatus c;
  c.limit_bytes = 1ull << 30;
  c.bytes = 3 * 1048576;
  c.entries = 3;
  c.hits = 7;
  c.misses = 3;
  c.fetched_bytes = 3 * 1048576;
  c.range_reads = 2;
  c.range_bytes = 4096;
  c.listed = {{"http://h/d/s-000.tar", "web", 1048576, true},
              {"http://h/d/s-001.tar", "", 1048576, false}};
  c.entries_unlisted = 1;
  c.bytes_unlisted = 1048576;
  CHECK(RenderCache(c) ==
        "shard cache: 3 entries, 3.0 MiB of 1.0 GiB; 7 hits, 3 misses (3.0 MiB fetched), 2 "
        "range reads (4.0 KiB), 0 evicted, 0 damaged\n"
        "\n"
        "URL                        SIZE  IN USE  DATASET\n"
        "http://h/d/s-000.tar    1.0 MiB  yes     web\n"
        "http://h/d/s-001.tar    1.0 MiB  no      -\n"
        "(1 more entries, 1.0 MiB, of datasets not yours, or past the listing's limit)\n");

  ShardCacheStatus empty;
  CHECK(RenderCache(empty) ==
        "shard cache: 0 entries, 0 B of 0 B; 0 hits, 0 misses (0 B fetched), 0 range reads "
        "(0 B), 0 evicted, 0 damaged\n");
}

TEST_CASE("clearing says what went and what a reader kept") {
  CHECK(RenderCleared({2, 2048, 0}) == "cleared 2 entries (2.0 KiB)\n");
  CHECK(RenderCleared({2, 2048, 1}) == "cleared 2 entries (2.0 KiB); kept 1 in use\n");
}

}  // namespace
}  // namespace ember::emberctl
