#include "daemon/data/remote/shard_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <future>
#include <sstream>
#include <utility>
#include <vector>

#include "common/fnv1a.h"
#include "pack/format.h"

namespace ember::daemon {
namespace {

// FNV-1a of the URL as 16 hex digits: the entry's file name (the meta keeps the URL, so a
// collision is caught, not served).
std::string KeyOf(const std::string& url) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(Fnv1a64(url.data(), url.size())));
  return text;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string MetaText(const std::string& url, uint64_t size, const std::string& etag, uint32_t crc) {
  return url + "\n" + std::to_string(size) + "\n" + etag + "\n" + std::to_string(crc) + "\n";
}

bool ParseMeta(const std::string& text, std::string& url, uint64_t& size, std::string& etag,
               uint32_t& crc) {
  std::istringstream in(text);
  std::string size_text, crc_text;
  if (!std::getline(in, url) || !std::getline(in, size_text) || !std::getline(in, etag) ||
      !std::getline(in, crc_text))
    return false;
  try {
    size = std::stoull(size_text);
    crc = static_cast<uint32_t>(std::stoul(crc_text));
  } catch (...) {
    return false;
  }
  return !url.empty();
}

}  // namespace

std::string ShardCache::PathOf(const std::string& key, const char* suffix) const {
  return dir_ + "/" + key + suffix;
}

Result<std::unique_ptr<ShardCache>> ShardCache::Open(Env& env, const std::string& dir,
                                                     uint64_t limit, HttpFetcher fetcher) {
  EMBER_RETURN_IF_ERROR(env.CreateDirs(dir));
  std::unique_ptr<ShardCache> cache(new ShardCache(env, dir, limit, std::move(fetcher)));
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(dir));
  MutexLock lock(&cache->mu_);
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (EndsWith(name, ".part")) {
      (void)env.RemoveAll(path);  // a download cut short
      continue;
    }
    if (!EndsWith(name, ".meta")) continue;
    const std::string key = name.substr(0, name.size() - 5);
    Entry entry;
    Result<std::string> meta = env.ReadFile(path);
    Result<std::unique_ptr<ReadableFile>> shard = env.OpenForRead(cache->PathOf(key, ".shard"));
    if (!meta.ok() || !ParseMeta(*meta, entry.url, entry.size, entry.etag, entry.crc) ||
        KeyOf(entry.url) != key || !shard.ok() || (*shard)->Size() != entry.size) {
      cache->Remove(key);
      continue;
    }
    cache->bytes_ += entry.size;
    cache->entries_.emplace(key, std::move(entry));
  }
  for (const std::string& name : names) {  // data without meta: not complete
    if (!EndsWith(name, ".shard")) continue;
    const std::string key = name.substr(0, name.size() - 6);
    if (cache->entries_.count(key) == 0) (void)env.RemoveAll(dir + "/" + name);
  }
  EMBER_RETURN_IF_ERROR(env.CreateDirs(dir + "/notes"));
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> notes, env.ListDir(dir + "/notes"));
  for (const std::string& name : notes) {
    if (!EndsWith(name, ".note")) continue;
    Result<std::unique_ptr<ReadableFile>> file = env.OpenForRead(dir + "/notes/" + name);
    if (!file.ok()) continue;
    NoteEntry& note = cache->notes_[name.substr(0, name.size() - 5)];
    note.bytes = (*file)->Size();
    cache->note_bytes_ += note.bytes;
  }
  cache->TrimNotes(0);
  EMBER_RETURN_IF_ERROR(cache->MakeRoom(0, dir, Fetch::kEvicting));
  return cache;
}

void ShardCache::Remove(const std::string& key) {
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    bytes_ -= it->second.size;
    entries_.erase(it);
  }
  (void)env_.RemoveAll(PathOf(key, ".meta"));
  (void)env_.RemoveAll(PathOf(key, ".shard"));
}

std::optional<uint64_t> ShardCache::NextUseOf(const std::string& url) const {
  std::optional<uint64_t> soonest;
  if (eviction_ == Eviction::kLru) return soonest;
  for (const auto& [id, next_use] : next_uses_) {
    const std::optional<uint64_t> next = next_use(url);
    if (next && (!soonest || *next < *soonest)) soonest = next;
  }
  return soonest;
}

Status ShardCache::MakeRoom(uint64_t need, const std::string& for_url, Fetch fetch) {
  if (need > limit_) {
    return ResourceExhausted(RedactUrl(for_url) + ": a shard of " + std::to_string(need) +
                             " bytes does not fit the shard cache's " + std::to_string(limit_) +
                             " bytes (cache_limit)");
  }
  // A prefetch evicts only entries used after the shard it fetches (Belady), or with
  // nothing known of the order, none.
  std::optional<uint64_t> bound;
  if (fetch == Fetch::kIfRoom && eviction_ == Eviction::kBelady) {
    bound = NextUseOf(for_url);
    if (!bound && bytes_ + reserved_ + need > limit_)
      return ResourceExhausted(RedactUrl(for_url) + ": no free room in the shard cache");
  }
  while (bytes_ + reserved_ + need > limit_) {
    const std::string* victim = nullptr;
    std::optional<uint64_t> victim_next;
    uint64_t victim_use = 0;
    for (const auto& [key, entry] : entries_) {
      if (entry.mapped.use_count() > 1) continue;  // a reader holds it
      const std::optional<uint64_t> next = NextUseOf(entry.url);
      if (bound && next && *next <= *bound) continue;  // needed no later than the prefetch
      // Farthest next use first (never again is farthest), then least recently used.
      const bool farther =
          victim == nullptr ||
          (victim_next.has_value() && (!next.has_value() || *next > *victim_next)) ||
          (next == victim_next && entry.last_use < victim_use);
      if (farther) {
        victim = &key;
        victim_next = next;
        victim_use = entry.last_use;
      }
    }
    if (victim == nullptr && fetch == Fetch::kIfRoom)
      return ResourceExhausted(RedactUrl(for_url) + ": no room in the shard cache before its use");
    if (victim == nullptr) {
      return ResourceExhausted(RedactUrl(for_url) + ": the shard cache's " +
                               std::to_string(limit_) + " bytes (cache_limit) are taken by " +
                               std::to_string(bytes_ + reserved_) +
                               " bytes of shards in use; it needs " + std::to_string(need) +
                               " more");
    }
    ++stats_.evictions;
    Remove(std::string(*victim));
  }
  return Status::Ok();
}

Result<uint32_t> ShardCache::Download(const std::string& url, const std::string& key,
                                      uint64_t size) {
  const std::string part = PathOf(key, ".part");
  (void)env_.RemoveAll(part);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env_.CreateWritableFile(part));
  uint32_t crc = 0;
  uint64_t written = 0;
  Status status = fetcher_.Get(url, std::nullopt, [&](uint64_t offset, const char* data, size_t n) {
    if (offset == 0) crc = 0, written = 0;  // a retry starts again
    if (offset + n > size) {
      return DataLoss("GET " + RedactUrl(url) + ": more than the " + std::to_string(size) +
                      " bytes announced");
    }
    EMBER_RETURN_IF_ERROR(file->WriteAt(offset, data, n));
    crc = pack::Crc32(data, n, crc);
    written = offset + n;
    return Status::Ok();
  });
  if (status.ok() && written != size) {
    status = DataLoss("GET " + RedactUrl(url) + ": " + std::to_string(written) +
                      " bytes, the object has " + std::to_string(size));
  }
  if (status.ok()) status = file->Sync();
  Status closed = file->Close();
  if (status.ok()) status = closed;
  if (status.ok()) status = env_.Rename(part, PathOf(key, ".shard"));
  if (status.ok()) {
    status = env_.WriteFileAtomic(PathOf(key, ".meta"), MetaText(url, size, "", crc));
  }
  if (!status.ok()) {
    (void)env_.RemoveAll(part);
    (void)env_.RemoveAll(PathOf(key, ".shard"));
    return status;
  }
  return crc;
}

Result<std::shared_ptr<const MappedFile>> ShardCache::Get(const std::string& url,
                                                          std::optional<uint64_t> size) {
  return Find(url, size, Fetch::kEvicting);
}

std::shared_ptr<const MappedFile> ShardCache::Cached(const std::string& url) {
  Result<std::shared_ptr<const MappedFile>> found = Find(url, std::nullopt, Fetch::kNever);
  return found.ok() ? *found : nullptr;
}

Result<std::shared_ptr<const MappedFile>> ShardCache::Find(const std::string& url,
                                                           std::optional<uint64_t> size,
                                                           Fetch fetch) {
  const std::string key = KeyOf(url);
  enum class Step { kMap, kWait, kDownload };
  for (int round = 0; round < 4; ++round) {
    Step step = Step::kDownload;
    std::shared_ptr<std::shared_future<Status>> wait;
    bool check = false;
    uint64_t expected_size = 0;
    uint32_t expected_crc = 0;
    {
      MutexLock lock(&mu_);
      auto it = entries_.find(key);
      if (it != entries_.end() && it->second.url == url) {
        Entry& entry = it->second;
        entry.last_use = ++clock_;
        if (entry.mapped) {
          ++stats_.hits;
          return entry.mapped;
        }
        check = !entry.checked;
        expected_size = entry.size;
        expected_crc = entry.crc;
        step = Step::kMap;
      } else if (auto d = downloading_.find(key); d != downloading_.end()) {
        wait = d->second;
        step = Step::kWait;
      } else if (it != entries_.end()) {
        Remove(key);  // another URL with the same key
      }
    }
    if (step == Step::kWait) {
      Status downloaded = wait->get();
      if (!downloaded.ok()) return downloaded;
      continue;
    }
    if (step == Step::kDownload) {
      if (fetch == Fetch::kNever) return NotFound(RedactUrl(url) + ": not in the shard cache");
      if (!size) {
        EMBER_ASSIGN_OR_RETURN(ObjectInfo info, fetcher_.Stat(url));
        size = info.size;
      }
      std::promise<Status> promise;
      {
        MutexLock lock(&mu_);
        if (downloading_.count(key) != 0 || entries_.count(key) != 0) continue;  // raced
        EMBER_RETURN_IF_ERROR(MakeRoom(*size, url, fetch));
        reserved_ += *size;
        downloading_[key] = std::make_shared<std::shared_future<Status>>(promise.get_future().share());
      }
      Result<uint32_t> crc = Download(url, key, *size);
      {
        MutexLock lock(&mu_);
        reserved_ -= *size;
        downloading_.erase(key);
        if (crc.ok()) {
          Entry entry;
          entry.url = url;
          entry.size = *size;
          entry.crc = *crc;
          entry.checked = true;  // its checksum is that of the bytes that came
          entry.last_use = ++clock_;
          bytes_ += *size;
          entries_[key] = std::move(entry);
          ++stats_.misses;
          stats_.fetched_bytes += *size;
        }
      }
      promise.set_value(crc.status());
      if (!crc.ok()) return crc.status();
      continue;  // now cached: map it
    }
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                           env_.MapReadOnly(PathOf(key, ".shard")));
    std::shared_ptr<const MappedFile> mapped(std::move(file));
    // The first use of an entry found at Open reads it once (outside the lock).
    const bool intact = !check || (mapped->size() == expected_size &&
                                   pack::Crc32(mapped->data(), mapped->size()) == expected_crc &&
                                   !mapped->shrunk());
    MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.url != url) continue;  // evicted meanwhile
    Entry& entry = it->second;
    if (!intact) {
      ++stats_.damaged;
      Remove(key);
      continue;  // fetched again
    }
    entry.checked = true;
    if (entry.mapped) return entry.mapped;  // mapped by another thread meanwhile
    entry.mapped = mapped;
    ++stats_.hits;
    return mapped;
  }
  return Unavailable(RedactUrl(url) + ": the shard cache could not keep it (evicted, damaged "
                                      "or raced four times in a row)");
}

ShardCache::~ShardCache() {
  std::vector<std::thread> fetchers;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
    fetchers.swap(fetchers_);
  }
  queued_.SignalAll();
  for (std::thread& t : fetchers) t.join();
}

void ShardCache::Prefetch(const std::string& url, uint64_t size) {
  {
    MutexLock lock(&mu_);
    const std::string key = KeyOf(url);
    if (stopping_ || queue_.size() >= kMaxQueued || downloading_.count(key) != 0) return;
    if (auto it = entries_.find(key); it != entries_.end() && it->second.url == url) return;
    for (const auto& [queued, bytes] : queue_) {
      if (queued == url) return;
    }
    queue_.emplace_back(url, size);
    if (fetchers_.empty()) {
      for (int i = 0; i < kFetchThreads; ++i) fetchers_.emplace_back([this] { FetchLoop(); });
    }
  }
  queued_.Signal();
}

void ShardCache::FetchLoop() {
  while (true) {
    std::pair<std::string, uint64_t> next;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) queued_.Wait(&mu_);
      if (stopping_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    (void)Find(next.first, next.second, Fetch::kIfRoom);  // a reader reports failures
  }
}

Status ShardCache::ReadRange(const std::string& url, uint64_t offset, uint64_t size,
                             std::string& out) {
  out.resize(size);
  EMBER_RETURN_IF_ERROR(
      fetcher_.Get(url, ByteRange{offset, size}, [&](uint64_t at, const char* data, size_t n) {
        if (at + n > size) return DataLoss("GET " + RedactUrl(url) + ": more than the range");
        std::memcpy(out.data() + at, data, n);
        return Status::Ok();
      }));
  MutexLock lock(&mu_);
  ++stats_.range_reads;
  stats_.range_bytes += size;
  return Status::Ok();
}

void ShardCache::TrimNotes(uint64_t need) {
  while (!notes_.empty() && note_bytes_ + need > limit_ / 16) {
    auto oldest = notes_.begin();
    for (auto it = notes_.begin(); it != notes_.end(); ++it)
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    note_bytes_ -= oldest->second.bytes;
    (void)env_.RemoveAll(dir_ + "/notes/" + oldest->first + ".note");
    notes_.erase(oldest);
  }
}

std::optional<std::string> ShardCache::Note(const std::string& url, const ObjectInfo& version) {
  if (version.etag.empty()) return std::nullopt;
  const std::string key = KeyOf(url);
  {
    MutexLock lock(&mu_);
    auto it = notes_.find(key);
    if (it == notes_.end()) return std::nullopt;
    it->second.last_use = ++clock_;
  }
  Result<std::string> text = env_.ReadFile(dir_ + "/notes/" + key + ".note");
  const std::string header = MetaText(url, version.size, version.etag, 0);
  if (!text.ok() || text->compare(0, header.size(), header) != 0) return std::nullopt;
  MutexLock lock(&mu_);
  ++stats_.notes_used;
  return text->substr(header.size());
}

void ShardCache::SaveNote(const std::string& url, const ObjectInfo& version,
                          const std::string& bytes) {
  if (version.etag.empty()) return;
  const std::string key = KeyOf(url);
  const std::string text = MetaText(url, version.size, version.etag, 0) + bytes;
  MutexLock lock(&mu_);
  if (text.size() > limit_ / 16) return;
  if (auto it = notes_.find(key); it != notes_.end()) {
    note_bytes_ -= it->second.bytes;
    notes_.erase(it);
  }
  TrimNotes(text.size());
  if (!env_.WriteFileAtomic(dir_ + "/notes/" + key + ".note", text).ok()) return;
  notes_[key] = NoteEntry{text.size(), ++clock_};
  note_bytes_ += text.size();
}

bool ShardCache::Contains(const std::string& url) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(KeyOf(url));
  return it != entries_.end() && it->second.url == url;
}

std::shared_ptr<void> ShardCache::AddNextUse(NextUse next_use) {
  MutexLock lock(&mu_);
  const uint64_t id = next_registration_++;
  next_uses_[id] = std::move(next_use);
  return std::shared_ptr<void>(nullptr, [this, id](void*) {
    MutexLock lock(&mu_);
    next_uses_.erase(id);
  });
}

void ShardCache::SetEviction(Eviction eviction) {
  MutexLock lock(&mu_);
  eviction_ = eviction;
}

void ShardCache::SetPrefetchSteps(uint32_t steps) {
  MutexLock lock(&mu_);
  prefetch_steps_ = steps;
}

uint32_t ShardCache::prefetch_steps() const {
  MutexLock lock(&mu_);
  return prefetch_steps_;
}

ShardCacheStats ShardCache::stats() const {
  MutexLock lock(&mu_);
  ShardCacheStats stats = stats_;
  stats.bytes = bytes_;
  stats.entries = entries_.size();
  return stats;
}

std::vector<ShardCache::EntryInfo> ShardCache::Entries() const {
  std::vector<EntryInfo> out;
  {
    MutexLock lock(&mu_);
    out.reserve(entries_.size());
    for (const auto& [key, entry] : entries_)
      out.push_back(EntryInfo{entry.url, entry.size, entry.mapped.use_count() > 1});
  }
  std::sort(out.begin(), out.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.url < b.url; });
  return out;
}

ShardCache::Cleared ShardCache::Clear() {
  Cleared cleared;
  MutexLock lock(&mu_);
  std::vector<std::string> victims;
  for (const auto& [key, entry] : entries_) {
    if (entry.mapped.use_count() > 1) {
      ++cleared.in_use;
      continue;
    }
    victims.push_back(key);
    ++cleared.entries;
    cleared.bytes += entry.size;
  }
  for (const std::string& key : victims) Remove(key);
  return cleared;
}

}  // namespace ember::daemon
