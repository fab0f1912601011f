// ShardCache: a node-local cache of remote shards (whole objects) as files in one
// directory, bounded by a byte limit and kept across restarts.
//
// Entries: DIR/<key>.shard (the bytes) and DIR/<key>.meta (url, size, ETag, CRC-32 of the
// bytes), key = a hash of the URL. A shard is downloaded to DIR/<key>.part, checked (its
// size, its CRC-32 as computed while it came), renamed into place, then its meta written
// atomically: a crash leaves a .part or a .shard without meta, removed at the next Open.
// An entry found at Open is checked (size and CRC-32, reading it once) when first used;
// a damaged one is removed and fetched again.
//
// The limit holds for what the cache keeps: before a download, entries are evicted until
// the new shard fits. The victim is the entry whose next use is farthest away, as the
// registered NextUse callbacks say (Belady's rule, exact when they know the future order,
// as emberd's sources do from their streams' plans); entries with no next use go first;
// ties (and no callback) fall back to least recently used. A prefetch evicts only entries
// used later than the shard it fetches (so it never pushes out what is needed sooner).
// With Eviction::kLru (for comparison) the callbacks are ignored: the least recently used
// entry goes, also for a prefetch. An entry stays mapped while cached; entries a reader
// holds (a Get's result still held) are not evicted; if those alone leave no room, Get is
// kResourceExhausted naming the limit.
//
// Thread-safe. Concurrent Gets of one URL download it once.
#ifndef EMBER_DAEMON_DATA_REMOTE_SHARD_CACHE_H_
#define EMBER_DAEMON_DATA_REMOTE_SHARD_CACHE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "daemon/data/remote/http_fetch.h"
#include "ember/status.h"

namespace ember::daemon {

struct ShardCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;         // downloads started
  uint64_t fetched_bytes = 0;  // bytes downloaded
  uint64_t evictions = 0;
  uint64_t damaged = 0;        // entries found damaged and removed
  uint64_t range_reads = 0;    // ReadRange calls (bytes read around the cache)
  uint64_t range_bytes = 0;
  uint64_t notes_used = 0;     // Note() answers
  uint64_t bytes = 0;          // held now
  uint64_t entries = 0;
};

class ShardCache {
 public:
  // Steps until `url` is read next (smaller: sooner), or nullopt if not known to be
  // read again (or not a URL the callback knows). Called with the cache's lock held: it
  // must not call into the cache.
  using NextUse = std::function<std::optional<uint64_t>(const std::string& url)>;
  enum class Eviction { kBelady, kLru };

  // Opens (creating) the cache directory `dir` with `limit` bytes, keeping the complete
  // entries and the notes found there (over the limit, entries are removed, in no
  // particular order, until the rest fit: their last use is not kept across restarts).
  static Result<std::unique_ptr<ShardCache>> Open(Env& env, const std::string& dir,
                                                  uint64_t limit, HttpFetcher fetcher);

  // The shard at `url`, mapped: the cached entry (checked once), else downloaded first.
  // `size` is the object's size when known (its HEAD otherwise). Errors: the fetcher's
  // (naming the URL), kDataLoss for a download whose size or checksum is wrong,
  // kResourceExhausted when the shards in use leave no room.
  Result<std::shared_ptr<const MappedFile>> Get(const std::string& url,
                                                std::optional<uint64_t> size = std::nullopt);

  // The shard at `url` if it is cached (mapped, checked once), else null: never fetches.
  std::shared_ptr<const MappedFile> Cached(const std::string& url);

  // Starts fetching `url` (`size` bytes) on one of the cache's fetch threads unless it is
  // cached or coming, if it fits in the room left or in the room of entries used later
  // than it (see above); requests are fetched in the order they came; at most kMaxQueued
  // wait (more are dropped). Never blocks on I/O; failures are left to the readers.
  void Prefetch(const std::string& url, uint64_t size);
  static constexpr size_t kMaxQueued = 256;
  static constexpr int kFetchThreads = 2;

  // Stops the fetch threads (waiting for their downloads in flight).
  ~ShardCache();

  // Bytes [offset, offset + size) of `url`, fetched (a range GET) into `out` without
  // caching them: for a reader that cannot have the shard cached (its Get was
  // kResourceExhausted). The fetcher's errors.
  Status ReadRange(const std::string& url, uint64_t offset, uint64_t size, std::string& out);

  // The object's size and ETag (a HEAD with the cache's fetcher): the version of it that
  // notes are kept for.
  Result<ObjectInfo> Stat(const std::string& url) const { return fetcher_.Stat(url); }

  // The fetcher the cache downloads with (its options name the S3 endpoint; a source
  // lists S3 prefixes with it).
  const HttpFetcher& fetcher() const { return fetcher_; }

  // Notes: small records about one version of an object (a shard's tar index, so that
  // registering or loading a set again needs no download), kept beside the cache in
  // DIR/notes, across restarts and after the shard's entry is evicted. All notes
  // together stay within limit / 16 bytes (the least recently used go). Only versions
  // with an ETag are noted (a size alone does not tell two objects apart).
  std::optional<std::string> Note(const std::string& url, const ObjectInfo& version);
  void SaveNote(const std::string& url, const ObjectInfo& version, const std::string& bytes);

  // Whether `url` is cached (complete), without fetching or checking it.
  bool Contains(const std::string& url) const;

  // Registers a NextUse callback (a dataset's source, answering for its shards' URLs);
  // an entry's next use is the soonest any callback answers. The registration ends when
  // the returned handle is destroyed (before the cache).
  [[nodiscard]] std::shared_ptr<void> AddNextUse(NextUse next_use);
  void SetEviction(Eviction eviction);
  // How many steps ahead sources prefetch shards for their streams (the cache_prefetch_steps
  // setting; 0: only the next batch's).
  void SetPrefetchSteps(uint32_t steps);
  uint32_t prefetch_steps() const;
  ShardCacheStats stats() const;
  uint64_t limit() const { return limit_; }
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    std::string url;
    uint64_t size = 0;
    uint32_t crc = 0;
    std::string etag;
    bool checked = false;             // its bytes were verified by this process
    uint64_t last_use = 0;            // a counter: larger is more recent
    std::shared_ptr<const MappedFile> mapped;  // kept while cached; in use if shared
  };

  ShardCache(Env& env, std::string dir, uint64_t limit, HttpFetcher fetcher)
      : env_(env), dir_(std::move(dir)), limit_(limit), fetcher_(std::move(fetcher)) {}

  std::string PathOf(const std::string& key, const char* suffix) const;
  enum class Fetch { kEvicting, kIfRoom, kNever };
  // Removes entries until `need` more bytes fit: any entry no reader holds (kEvicting),
  // or (kIfRoom, a prefetch) only entries used later than `for_url`. Needs mu_.
  Status MakeRoom(uint64_t need, const std::string& for_url, Fetch fetch) REQUIRES(mu_);
  // The soonest next use of `url` the callbacks know (nullopt: none).
  std::optional<uint64_t> NextUseOf(const std::string& url) const REQUIRES(mu_);
  void Remove(const std::string& key) REQUIRES(mu_);
  // Removes the least recently used notes until `need` more bytes fit their budget.
  void TrimNotes(uint64_t need) REQUIRES(mu_);
  void FetchLoop();
  // Get, fetching a missing shard as `fetch` says.
  Result<std::shared_ptr<const MappedFile>> Find(const std::string& url,
                                                 std::optional<uint64_t> size, Fetch fetch);
  // Fetches `url` into the entry's files; its CRC-32. Without mu_.
  Result<uint32_t> Download(const std::string& url, const std::string& key, uint64_t size);

  Env& env_;
  const std::string dir_;
  const uint64_t limit_;
  const HttpFetcher fetcher_;
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);  // by key
  std::map<std::string, std::shared_ptr<std::shared_future<Status>>> downloading_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t reserved_ GUARDED_BY(mu_) = 0;  // for downloads under way
  uint64_t clock_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, NextUse> next_uses_ GUARDED_BY(mu_);  // by registration
  uint64_t next_registration_ GUARDED_BY(mu_) = 0;
  Eviction eviction_ GUARDED_BY(mu_) = Eviction::kBelady;
  uint32_t prefetch_steps_ GUARDED_BY(mu_) = 64;
  std::deque<std::pair<std::string, uint64_t>> queue_ GUARDED_BY(mu_);  // to prefetch
  bool stopping_ GUARDED_BY(mu_) = false;
  CondVar queued_;
  std::vector<std::thread> fetchers_ GUARDED_BY(mu_);  // started by the first Prefetch
  ShardCacheStats stats_ GUARDED_BY(mu_);
  struct NoteEntry {
    uint64_t bytes = 0;
    uint64_t last_use = 0;
  };
  std::map<std::string, NoteEntry> notes_ GUARDED_BY(mu_);  // by key
  uint64_t note_bytes_ GUARDED_BY(mu_) = 0;

  // What the cache holds, and clearing it (emberctl cache).
 public:
  struct EntryInfo {
    std::string url;      // as fetched: may hold credentials (RedactUrl before showing it)
    uint64_t size = 0;
    bool in_use = false;  // a reader holds it: neither evicted nor cleared now
  };
  // The complete entries (not downloads under way), by URL.
  std::vector<EntryInfo> Entries() const;

  struct Cleared {
    uint64_t entries = 0;  // removed
    uint64_t bytes = 0;    // freed
    uint64_t in_use = 0;   // entries kept because a reader holds them
  };
  // Removes every entry no reader holds (downloads under way and notes stay).
  Cleared Clear();
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_REMOTE_SHARD_CACHE_H_
