#include "daemon/data/parquet/row_group_cache.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace ember::daemon {
namespace {

// A row group of one column holding `bytes` bytes.
RowGroupCache::Decode Of(uint64_t bytes, std::atomic<int>* decodes) {
  return [bytes, decodes]() -> Result<DecodedRowGroup> {
    ++*decodes;
    DecodedRowGroup group;
    group.columns.emplace_back();
    group.columns[0].data = std::string(bytes, 'x');
    return group;
  };
}

TEST_CASE("a row group decodes once while cached; the least recently used go past the budget") {
  const uint64_t size = DecodedRowGroup{{ParquetValues{{}, {}, std::string(1000, 'x')}}}.bytes();
  RowGroupCache cache(2 * size);
  std::atomic<int> decodes{0};
  for (int round = 0; round < 3; ++round) {
    auto a = cache.Get(1, Of(1000, &decodes));
    REQUIRE(a.ok());
    CHECK((*a)->columns[0].data.size() == 1000);
  }
  CHECK(decodes == 1);
  REQUIRE(cache.Get(2, Of(1000, &decodes)).ok());
  REQUIRE(cache.Get(1, Of(1000, &decodes)).ok());  // 1 is now the most recently used
  REQUIRE(cache.Get(3, Of(1000, &decodes)).ok());  // evicts 2
  CHECK(decodes == 3);
  REQUIRE(cache.Get(1, Of(1000, &decodes)).ok());
  CHECK(decodes == 3);
  REQUIRE(cache.Get(2, Of(1000, &decodes)).ok());
  CHECK(decodes == 4);
  const RowGroupCacheStats stats = cache.stats();
  CHECK(stats.decodes == 4);
  CHECK(stats.hits == 4);
  CHECK(stats.evictions == 2);
  CHECK(stats.entries == 2);
  CHECK(stats.bytes == 2 * size);
}

TEST_CASE("a budget below one row group keeps the last one; a reader keeps its own alive") {
  RowGroupCache cache(10);
  std::atomic<int> decodes{0};
  auto held = cache.Get(1, Of(1000, &decodes));
  REQUIRE(held.ok());
  REQUIRE(cache.Get(2, Of(500, &decodes)).ok());
  CHECK(cache.stats().entries == 1);
  CHECK((*held)->columns[0].data.size() == 1000);  // evicted, still valid
  REQUIRE(cache.Get(2, Of(500, &decodes)).ok());
  CHECK(decodes == 2);
}

TEST_CASE("a failed decode is kept: its rows fail alike without decoding again") {
  RowGroupCache cache(1 << 20);
  int calls = 0;
  auto failing = [&]() -> Result<DecodedRowGroup> {
    ++calls;
    return DataLoss("x.parquet: row group 3: bad page");
  };
  for (int i = 0; i < 3; ++i) {
    auto got = cache.Get(7, failing);
    CHECK(got.status().code() == StatusCode::kDataLoss);
    CHECK(got.status().message() == "x.parquet: row group 3: bad page");
  }
  CHECK(calls == 1);
}

TEST_CASE("threads asking for a row group being decoded wait for that one decode") {
  RowGroupCache cache(1 << 20);
  std::atomic<int> decodes{0};
  auto slow = [&]() -> Result<DecodedRowGroup> {
    ++decodes;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    DecodedRowGroup group;
    group.columns.emplace_back();
    group.columns[0].data = "decoded";
    return group;
  };
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto got = cache.Get(5, slow);
      if (got.ok() && (*got)->columns[0].data == "decoded") ++good;
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(good == 8);
  CHECK(decodes == 1);
}

}  // namespace
}  // namespace ember::daemon
