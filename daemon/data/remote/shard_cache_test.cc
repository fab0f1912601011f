#include "daemon/data/remote/shard_cache.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/remote/nginx_testing.h"

namespace ember::daemon {
namespace {

constexpr uint64_t kShardBytes = 100000;

std::string ShardBytes(char seed) {
  std::string bytes(kShardBytes, '\0');
  for (uint64_t i = 0; i < kShardBytes; ++i) bytes[i] = static_cast<char>(seed + i % 7);
  return bytes;
}

// Shards a, b, c, d, e (100,000 bytes each) under www/d/.
std::string WriteShards(const std::string& name) {
  const std::string root = FreshTestDir(name);
  for (char c : std::string("abcde")) WriteTestFile(root + "/d/" + c + ".tar", ShardBytes(c));
  return root;
}

std::unique_ptr<ShardCache> MustOpen(Env& env, const std::string& dir, uint64_t limit) {
  FetchOptions options;
  options.attempts = 1;
  auto cache = ShardCache::Open(env, dir, limit, HttpFetcher(options));
  INFO((cache.ok() ? std::string() : cache.status().ToString()));
  REQUIRE(cache.ok());
  return std::move(cache).value();
}

std::string Bytes(const std::shared_ptr<const MappedFile>& file) {
  return std::string(file->data(), file->size());
}

TEST_CASE("a shard is downloaded once, then served from the cache; concurrent gets share the download") {
  auto env = NewPosixEnv();
  NginxServer nginx(WriteShards("once-www"));
  auto cache = MustOpen(*env, FreshTestDir("once-cache"), 10 * kShardBytes);
  auto first = cache->Get(nginx.Url("/d/a.tar"));
  REQUIRE(first.ok());
  CHECK(Bytes(*first) == ShardBytes('a'));
  auto again = cache->Get(nginx.Url("/d/a.tar"), kShardBytes);
  REQUIRE(again.ok());
  CHECK(again->get() == first->get());  // the same mapping
  CHECK(cache->stats().misses == 1);

  std::vector<std::thread> threads;
  std::vector<Status> statuses(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { statuses[t] = cache->Get(nginx.Url("/d/b.tar")).status(); });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : statuses) CHECK(s.ok());
  CHECK(cache->stats().misses == 2);
  CHECK(cache->stats().fetched_bytes == 2 * kShardBytes);
  CHECK(cache->stats().bytes == 2 * kShardBytes);

  auto missing = cache->Get(nginx.Url("/d/zz.tar"));
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(cache->stats().entries == 2);
}

TEST_CASE("prefetched shards are fetched in the background, once") {
  auto env = NewPosixEnv();
  NginxServer nginx(WriteShards("prefetch-www"));
  auto cache = MustOpen(*env, FreshTestDir("prefetch-cache"), 10 * kShardBytes);
  for (int i = 0; i < 3; ++i) {
    cache->Prefetch(nginx.Url("/d/c.tar"), kShardBytes);
    cache->Prefetch(nginx.Url("/d/d.tar"), kShardBytes);
  }
  for (int i = 0; i < 500 && cache->stats().entries < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(cache->Contains(nginx.Url("/d/c.tar")));
  CHECK(cache->Contains(nginx.Url("/d/d.tar")));
  auto c = cache->Get(nginx.Url("/d/c.tar"));
  REQUIRE(c.ok());
  CHECK(Bytes(*c) == ShardBytes('c'));
  CHECK(cache->stats().misses == 2);
}

TEST_CASE("over the limit, the entry used farthest in the future goes; LRU without a next use") {
  auto env = NewPosixEnv();
  NginxServer nginx(WriteShards("evict-www"));
  auto cache = MustOpen(*env, FreshTestDir("evict-cache"), 2 * kShardBytes + kShardBytes / 2);
  REQUIRE(cache->Get(nginx.Url("/d/a.tar")).ok());
  REQUIRE(cache->Get(nginx.Url("/d/b.tar")).ok());
  REQUIRE(cache->Get(nginx.Url("/d/a.tar")).ok());  // a used last: b is least recent
  REQUIRE(cache->Get(nginx.Url("/d/c.tar")).ok());
  CHECK(cache->Contains(nginx.Url("/d/a.tar")));
  CHECK_FALSE(cache->Contains(nginx.Url("/d/b.tar")));
  CHECK(cache->stats().evictions == 1);
  CHECK(cache->stats().bytes <= cache->limit());

  // Belady: a is needed again in 1 step, c in 50 (by one registration; another knows a
  // as needed in 70 and d in 2): c goes although a is older.
  std::map<std::string, uint64_t> next = {{nginx.Url("/d/a.tar"), 70}, {nginx.Url("/d/d.tar"), 2}};
  auto answer = [](const std::map<std::string, uint64_t>& m) {
    return [&m](const std::string& url) -> std::optional<uint64_t> {
      auto it = m.find(url);
      return it == m.end() ? std::nullopt : std::optional<uint64_t>(it->second);
    };
  };
  std::map<std::string, uint64_t> next2 = {{nginx.Url("/d/a.tar"), 1}, {nginx.Url("/d/c.tar"), 50}};
  auto first = cache->AddNextUse(answer(next));
  auto second = cache->AddNextUse(answer(next2));
  REQUIRE(cache->Get(nginx.Url("/d/d.tar")).ok());
  CHECK(cache->Contains(nginx.Url("/d/a.tar")));
  CHECK_FALSE(cache->Contains(nginx.Url("/d/c.tar")));
  CHECK(cache->stats().bytes <= cache->limit());

  // The second registration ends: a's next use is 70, d's 2; e comes and a goes.
  second.reset();
  REQUIRE(cache->Get(nginx.Url("/d/e.tar")).ok());
  CHECK_FALSE(cache->Contains(nginx.Url("/d/a.tar")));
  CHECK(cache->Contains(nginx.Url("/d/d.tar")));

  // LRU (the comparison setting) ignores what is known: d, the older, goes.
  cache->SetEviction(ShardCache::Eviction::kLru);
  REQUIRE(cache->Get(nginx.Url("/d/a.tar")).ok());
  CHECK_FALSE(cache->Contains(nginx.Url("/d/d.tar")));
  CHECK(cache->Contains(nginx.Url("/d/e.tar")));
}

TEST_CASE("a prefetch evicts only entries needed later than the shard it fetches") {
  auto env = NewPosixEnv();
  NginxServer nginx(WriteShards("prefetch-evict-www"));
  auto cache = MustOpen(*env, FreshTestDir("prefetch-evict-cache"), 2 * kShardBytes);
  std::map<std::string, uint64_t> next = {
      {nginx.Url("/d/a.tar"), 5}, {nginx.Url("/d/b.tar"), 30}, {nginx.Url("/d/c.tar"), 10},
      {nginx.Url("/d/d.tar"), 40}};
  Mutex mu;
  auto registration = cache->AddNextUse([&](const std::string& url) -> std::optional<uint64_t> {
    MutexLock lock(&mu);
    auto it = next.find(url);
    return it == next.end() ? std::nullopt : std::optional<uint64_t>(it->second);
  });
  REQUIRE(cache->Get(nginx.Url("/d/a.tar")).ok());
  REQUIRE(cache->Get(nginx.Url("/d/b.tar")).ok());
  auto wait_for = [&](const std::string& path, bool present) {
    for (int i = 0; i < 500 && cache->Contains(nginx.Url(path)) != present; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return cache->Contains(nginx.Url(path)) == present;
  };
  // c (needed at 10) comes in place of b (at 30), not of a (at 5).
  cache->Prefetch(nginx.Url("/d/c.tar"), kShardBytes);
  CHECK(wait_for("/d/c.tar", true));
  CHECK(cache->Contains(nginx.Url("/d/a.tar")));
  CHECK_FALSE(cache->Contains(nginx.Url("/d/b.tar")));
  // d (at 40) is needed after everything cached: it does not come.
  cache->Prefetch(nginx.Url("/d/d.tar"), kShardBytes);
  cache->Prefetch(nginx.Url("/d/e.tar"), kShardBytes);  // unknown: only into free room
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(cache->Contains(nginx.Url("/d/d.tar")));
  CHECK_FALSE(cache->Contains(nginx.Url("/d/e.tar")));
  CHECK(cache->stats().misses == 3);
  CHECK(cache->stats().bytes <= cache->limit());
}

TEST_CASE("shards in use are not evicted: no room is an error naming the limit") {
  auto env = NewPosixEnv();
  NginxServer nginx(WriteShards("busy-www"));
  auto cache = MustOpen(*env, FreshTestDir("busy-cache"), 2 * kShardBytes);
  auto a = cache->Get(nginx.Url("/d/a.tar"));
  auto b = cache->Get(nginx.Url("/d/b.tar"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto c = cache->Get(nginx.Url("/d/c.tar"));
  REQUIRE(c.status().code() == StatusCode::kResourceExhausted);
  CHECK(c.status().message() == nginx.Url("/d/c.tar") +
                                    ": the shard cache's 200000 bytes (cache_limit) are taken by "
                                    "200000 bytes of shards in use; it needs 100000 more");
  a->reset();
  CHECK(cache->Get(nginx.Url("/d/c.tar")).ok());  // a is no longer in use
  auto huge = cache->Get(nginx.Url("/d/d.tar"), 3 * kShardBytes);
  CHECK(huge.status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("the cache survives a restart; a damaged entry is fetched again; leftovers are removed") {
  auto env = NewPosixEnv();
  const std::string www = WriteShards("restart-www");
  const std::string dir = FreshTestDir("restart-cache");
  std::string url_a, url_b;
  int port = 0;
  {
    NginxServer nginx(www);
    port = nginx.port();
    url_a = nginx.Url("/d/a.tar");
    url_b = nginx.Url("/d/b.tar");
    auto cache = MustOpen(*env, dir, 10 * kShardBytes);
    REQUIRE(cache->Get(url_a).ok());
    REQUIRE(cache->Get(url_b).ok());
  }
  WriteTestFile(dir + "/0123456789abcdef.part", "a download cut short");
  {
    // No server now: what the cache holds is served without it.
    auto cache = MustOpen(*env, dir, 10 * kShardBytes);
    CHECK(cache->stats().entries == 2);
    CHECK_FALSE(env->FileExists(dir + "/0123456789abcdef.part"));
    auto a = cache->Get(url_a);
    REQUIRE(a.ok());
    CHECK(Bytes(*a) == ShardBytes('a'));
    CHECK(cache->stats().misses == 0);
  }
  // Damage b's bytes (same size): found at its first use, fetched again.
  auto names = env->ListDir(dir);
  REQUIRE(names.ok());
  for (const std::string& name : *names) {
    if (name.size() > 6 && name.substr(name.size() - 6) == ".shard" &&
        ReadTestFile(dir + "/" + name) == ShardBytes('b')) {
      std::string bytes = ShardBytes('b');
      bytes[5000] ^= 0x5a;
      WriteTestFile(dir + "/" + name, bytes);
    }
  }
  NginxServer nginx(www, port);  // back, on the same port: the same URLs
  auto cache = MustOpen(*env, dir, 10 * kShardBytes);
  auto b = cache->Get(url_b);
  REQUIRE(b.ok());
  CHECK(Bytes(*b) == ShardBytes('b'));
  CHECK(cache->stats().damaged == 1);
  CHECK(cache->stats().misses == 1);
}

TEST_CASE("Entries lists what the cache holds and which a reader holds; Clear keeps those") {
  auto env = NewPosixEnv();
  NginxServer nginx(WriteShards("clear-www"));
  const std::string dir = FreshTestDir("clear-cache");
  auto cache = MustOpen(*env, dir, 10 * kShardBytes);
  CHECK(cache->Entries().empty());
  for (const char* shard : {"/d/c.tar", "/d/a.tar"}) REQUIRE(cache->Get(nginx.Url(shard)).ok());
  auto held = cache->Get(nginx.Url("/d/b.tar"));  // a reader holds b
  REQUIRE(held.ok());

  const std::vector<ShardCache::EntryInfo> entries = cache->Entries();
  REQUIRE(entries.size() == 3);  // by URL
  CHECK(entries[0].url == nginx.Url("/d/a.tar"));
  CHECK(entries[1].url == nginx.Url("/d/b.tar"));
  CHECK(entries[2].url == nginx.Url("/d/c.tar"));
  for (const auto& entry : entries) CHECK(entry.size == kShardBytes);
  CHECK_FALSE(entries[0].in_use);
  CHECK(entries[1].in_use);
  CHECK_FALSE(entries[2].in_use);

  const ShardCache::Cleared cleared = cache->Clear();
  CHECK(cleared.entries == 2);
  CHECK(cleared.bytes == 2 * kShardBytes);
  CHECK(cleared.in_use == 1);
  CHECK(cache->stats().entries == 1);
  CHECK(cache->stats().bytes == kShardBytes);
  CHECK(cache->Contains(nginx.Url("/d/b.tar")));
  CHECK_FALSE(cache->Contains(nginx.Url("/d/a.tar")));
  CHECK(Bytes(*held) == ShardBytes('b'));  // the reader's bytes are untouched
  // The files went too: a restart finds only b.
  held->reset();
  cache.reset();
  auto reopened = MustOpen(*env, dir, 10 * kShardBytes);
  REQUIRE(reopened->Entries().size() == 1);
  CHECK(reopened->Entries()[0].url == nginx.Url("/d/b.tar"));

  // Nothing held: everything goes; a cleared shard is fetched again when read.
  CHECK(reopened->Clear().entries == 1);
  CHECK(reopened->Entries().empty());
  REQUIRE(reopened->Get(nginx.Url("/d/a.tar")).ok());
  CHECK(reopened->stats().misses == 1);
}

}  // namespace
}  // namespace ember::daemon
