// Test helpers for streams: a Source with checkable samples that can be made to fail or
// to block, and a source future that is ready at once.
#ifndef EMBER_DAEMON_STREAM_STREAM_TESTING_H_
#define EMBER_DAEMON_STREAM_STREAM_TESTING_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/data/dataset_cache.h"
#include "daemon/data/source.h"

namespace ember::daemon {

// Sample i is a uint32 [4] tensor {i, seed, epoch, decoding thread hash} and a label i%7.
// Sample `bad` (if any) fails as corrupt data. Thread-safe.
class FakeSource : public Source {
 public:
  FakeSource(uint64_t count, bool parallel, int64_t bad = -1, const std::string& on_error = "fail")
      : parallel_(parallel), bad_(bad) {
    info_.spec.name = "fake";
    info_.spec.on_error = on_error;
    info_.count = count;
    info_.tensors.push_back({"image", ring::DType::kInt32, {4}});
    info_.tensors.push_back({"label", ring::DType::kUInt8, {}});
  }
  const DatasetInfo& info() const override { return info_; }
  bool ParallelDecode() const override { return parallel_; }
  void Prefetch(const uint64_t* ids, size_t count) const override {
    std::lock_guard<std::mutex> lock(mu_);
    prefetched_.insert(prefetched_.end(), ids, ids + count);
  }
  std::vector<uint64_t> prefetched() const {
    std::lock_guard<std::mutex> lock(mu_);
    return prefetched_;
  }

  // Makes every ReadSample wait (up to 10 s) until two different threads have called it,
  // so that a test of the decode pool does not depend on how the OS schedules its threads:
  // a pool that spreads a batch over its threads passes at once, one that does not times
  // out with a single decoder.
  void RequireTwoThreads() { require_two_threads_ = true; }

  // Makes ReadSample (of the samples in `only`, or of all if it is empty) block until
  // Unblock() or until `limit` has passed (so that a test of code that wrongly waits for
  // the read fails instead of hanging). Call before reading starts.
  void Block(std::chrono::milliseconds limit, std::set<uint64_t> only = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_ = true;
    block_limit_ = limit;
    block_only_ = std::move(only);
  }
  // Waits up to `timeout` until sample `id` has been read; true if it has.
  bool WaitUntilRead(uint64_t id, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return read_.count(id) != 0; });
  }
  void Unblock() {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_ = false;
    changed_.notify_all();
  }
  // Waits up to `timeout` until `readers` ReadSample calls are blocked at once; true if
  // they are.
  bool WaitUntilBlocked(std::chrono::milliseconds timeout, int readers = 1) const {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return blocked_readers_ >= readers; });
  }

  Status ReadSample(uint64_t id, const SampleContext& ctx, void* const* dsts) const override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (require_two_threads_) {
        threads_.insert(std::this_thread::get_id());
        changed_.notify_all();
        changed_.wait_for(lock, std::chrono::seconds(10), [&] { return threads_.size() >= 2; });
      }
      if (blocked_ && (block_only_.empty() || block_only_.count(id) != 0)) {
        ++blocked_readers_;
        changed_.notify_all();
        changed_.wait_for(lock, block_limit_, [&] { return !blocked_; });
        --blocked_readers_;
      }
    }
    if (static_cast<int64_t>(id) == bad_) return DataLoss("/data/fake.bin: corrupt at byte 42");
    const auto thread = std::hash<std::thread::id>()(std::this_thread::get_id()) & 0x7fffffff;
    const int32_t image[4] = {static_cast<int32_t>(id), static_cast<int32_t>(ctx.seed),
                              static_cast<int32_t>(ctx.epoch), static_cast<int32_t>(thread)};
    std::memcpy(dsts[0], image, sizeof(image));
    *static_cast<uint8_t*>(dsts[1]) = static_cast<uint8_t>(id % 7);
    std::lock_guard<std::mutex> lock(mu_);
    read_.insert(id);
    changed_.notify_all();
    return Status::Ok();
  }

 private:
  DatasetInfo info_;
  bool parallel_;
  int64_t bad_;
  bool require_two_threads_ = false;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  mutable std::vector<uint64_t> prefetched_;  // guarded by mu_
  mutable std::set<std::thread::id> threads_;  // guarded by mu_
  mutable std::set<uint64_t> read_;            // guarded by mu_
  bool blocked_ = false;                       // guarded by mu_
  std::set<uint64_t> block_only_;              // guarded by mu_
  std::chrono::milliseconds block_limit_{0};   // guarded by mu_
  mutable int blocked_readers_ = 0;            // guarded by mu_
};

// Every byte follows from the sample: decoded anywhere, a sample is the same bytes.
// Sample i is "image" uint8[8192] (id, seed and epoch as uint64s, then bytes that follow
// from them) and "label" int64 i. Counts each (id, epoch) decoded.
class PatternSource : public Source {
 public:
  static constexpr uint64_t kRowBytes = 8192;  // two pages (a share group maps it)
  explicit PatternSource(uint64_t count) {
    info_.spec.name = "rows";
    info_.spec.on_error = "fail";
    info_.count = count;
    info_.fingerprint = 77;
    info_.tensors.push_back({"image", ring::DType::kUInt8, {int64_t{kRowBytes}}});
    info_.tensors.push_back({"label", ring::DType::kInt64, {}});
  }
  const DatasetInfo& info() const override { return info_; }
  bool ParallelDecode() const override { return true; }
  Status ReadSample(uint64_t id, const SampleContext& ctx, void* const* dsts) const override {
    Expected(id, ctx.seed, ctx.epoch, static_cast<uint8_t*>(dsts[0]));
    *static_cast<int64_t*>(dsts[1]) = static_cast<int64_t>(id);
    std::lock_guard<std::mutex> lock(mu_);
    ++decoded_[{id, ctx.epoch}];
    return Status::Ok();
  }
  static void Expected(uint64_t id, uint64_t seed, uint64_t epoch, uint8_t* row) {
    const uint64_t head[3] = {id, seed, epoch};
    std::memcpy(row, head, sizeof(head));
    for (uint64_t b = sizeof(head); b < kRowBytes; ++b)
      row[b] = static_cast<uint8_t>(id * 31 + epoch * 7 + b);
  }
  // How many times (id, epoch) was decoded, for each.
  std::map<std::pair<uint64_t, uint64_t>, int> decoded() const {
    std::lock_guard<std::mutex> lock(mu_);
    return decoded_;
  }

 private:
  DatasetInfo info_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<uint64_t, uint64_t>, int> decoded_;
};

// A source future that is already ready with `source`.
inline DatasetCache::SourceFuture Ready(std::shared_ptr<const Source> source) {
  std::promise<Result<std::shared_ptr<const Source>>> p;
  p.set_value(std::move(source));
  return p.get_future().share();
}

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_STREAM_STREAM_TESTING_H_
