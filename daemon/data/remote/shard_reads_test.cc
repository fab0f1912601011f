#include "daemon/data/remote/shard_reads.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/remote/nginx_testing.h"

namespace ember::daemon {
namespace {

constexpr uint64_t kShardBytes = 100000;

// A reader whose next reads are set by the test: batch b reads `batches[b]`.
class ScriptedReader : public ReadForecast {
 public:
  std::vector<std::vector<uint64_t>> batches;
  uint64_t now = 0;
  uint64_t Batches() const override { return now + 1; }
  std::vector<uint64_t> Upcoming(uint64_t n) const override {
    std::vector<uint64_t> ids;
    for (uint64_t b = now + 1; b < batches.size() && b <= now + n; ++b)
      ids.insert(ids.end(), batches[b].begin(), batches[b].end());
    return ids;
  }
  std::optional<uint64_t> NextRead(uint64_t begin, uint64_t end) const override {
    for (uint64_t b = now; b < batches.size(); ++b)
      for (uint64_t id : batches[b])
        if (id >= begin && id < end) return b - now;
    return std::nullopt;
  }
};

// Shards s0..s5 of 10 samples each, 100,000 bytes, under www/.
struct Fixture {
  Fixture(const std::string& name, uint64_t limit)
      : env(NewPosixEnv()), www(FreshTestDir(name + "-www")), nginx(Write(www)) {
    auto opened = ShardCache::Open(*env, FreshTestDir(name + "-cache"), limit, HttpFetcher());
    REQUIRE(opened.ok());
    cache = std::move(opened).value();
    for (int s = 0; s < 6; ++s) {
      set.urls.push_back(nginx.Url("/s" + std::to_string(s)));
      set.sizes.push_back(kShardBytes);
      set.first.push_back(10 * s);
      set.remote.push_back(true);
    }
    set.first.push_back(60);
  }
  static const std::string& Write(const std::string& www) {
    for (int s = 0; s < 6; ++s) WriteTestFile(www + "/s" + std::to_string(s), std::string(kShardBytes, 'a' + s));
    return www;
  }
  bool WaitCached(int s) {
    for (int i = 0; i < 500 && !cache->Contains(set.urls[s]); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return cache->Contains(set.urls[s]);
  }
  std::unique_ptr<Env> env;
  std::string www;
  NginxServer nginx;
  std::unique_ptr<ShardCache> cache;
  ShardSet set;
};

TEST_CASE("readers' next batches are prefetched; the cache evicts the shard read last") {
  Fixture f("shard-reads", 3 * kShardBytes);
  ShardReads reads(f.set, f.cache.get());
  auto reader = std::make_shared<ScriptedReader>();
  // Batches read shards 0, 1, 2 | 3 | 0 | 2 | 1.
  reader->batches = {{0, 11, 25}, {31}, {5}, {22}, {12}};
  reads.Follow(reader);
  CHECK(reads.ShardOf(0) == 0);
  CHECK(reads.ShardOf(59) == 5);
  CHECK(reads.ShardOf(30) == 3);

  // Batch 0's own shards and the next ones' (prefetch_steps 1: batch 1's shard 3, which
  // does not fit until a shard needed later than it can go: none yet).
  f.cache->SetPrefetchSteps(1);
  const std::vector<uint64_t> batch0 = reader->batches[0];
  reads.Prefetch(batch0.data(), batch0.size());
  for (int s : {0, 1, 2}) CHECK(f.WaitCached(s));
  CHECK_FALSE(f.cache->Contains(f.set.urls[3]));

  // Batch 1 starts: shard 3 is needed now; of 0 (at 2 batches), 1 (at 4), 2 (at 3) the
  // one read last, 1, goes.
  reader->now = 1;
  const std::vector<uint64_t> batch1 = reader->batches[1];
  reads.Prefetch(batch1.data(), batch1.size());
  REQUIRE(f.WaitCached(3));
  CHECK(f.cache->Contains(f.set.urls[0]));
  CHECK(f.cache->Contains(f.set.urls[2]));
  CHECK_FALSE(f.cache->Contains(f.set.urls[1]));
  CHECK(f.cache->stats().bytes <= f.cache->limit());
}

TEST_CASE("a source's readers that ended no longer count; local shards are left alone") {
  Fixture f("shard-reads-ended", 2 * kShardBytes);
  f.set.remote[4] = false;
  ShardReads reads(f.set, f.cache.get());
  {
    auto reader = std::make_shared<ScriptedReader>();
    reader->batches = {{1}, {45}};
    reads.Follow(reader);
    const std::vector<uint64_t> batch0 = reader->batches[0];
    reads.Prefetch(batch0.data(), batch0.size());
    CHECK(f.WaitCached(0));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(f.cache->stats().entries == 1);  // shard 4 is local: never fetched
}

}  // namespace
}  // namespace ember::daemon
