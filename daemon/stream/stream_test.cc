// Stream without RPC: a producer fills a real ring from a Source, spreading decoding
// sources over the decode pool, and the SDK's ring reader reads it back.
#include "daemon/stream/stream.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <vector>
#include <set>
#include <thread>

#include "sdk/src/ring_reader.h"

namespace ember::daemon {
namespace {

// Sample i is a uint32 [4] tensor {i, seed, epoch, decoding thread hash} and a label i%7.
// Sample `bad` (if any) fails as corrupt data.
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
  Status ReadSample(uint64_t id, const SampleContext& ctx, void* const* dsts) const override {
    if (require_two_threads_) {
      std::unique_lock<std::mutex> lock(mu_);
      threads_.insert(std::this_thread::get_id());
      threads_seen_.notify_all();
      threads_seen_.wait_for(lock, std::chrono::seconds(10), [&] { return threads_.size() >= 2; });
    }
    if (static_cast<int64_t>(id) == bad_) return DataLoss("/data/fake.bin: corrupt at byte 42");
    const int32_t image[4] = {static_cast<int32_t>(id), static_cast<int32_t>(ctx.seed),
                              static_cast<int32_t>(ctx.epoch),
                              static_cast<int32_t>(std::hash<std::thread::id>()(std::this_thread::get_id()) & 0x7fffffff)};
    std::memcpy(dsts[0], image, sizeof(image));
    *static_cast<uint8_t*>(dsts[1]) = static_cast<uint8_t>(id % 7);
    return Status::Ok();
  }

 private:
  DatasetInfo info_;
  bool parallel_;
  int64_t bad_;
  bool require_two_threads_ = false;
  mutable std::mutex mu_;
  mutable std::vector<uint64_t> prefetched_;
  mutable std::set<std::thread::id> threads_;
  mutable std::condition_variable threads_seen_;
};

DatasetCache::SourceFuture Ready(std::shared_ptr<const Source> source) {
  std::promise<Result<std::shared_ptr<const Source>>> p;
  p.set_value(std::move(source));
  return p.get_future().share();
}

struct Harness {
  std::unique_ptr<Env> env = NewPosixEnv();
  JobLedger ledger;
  DecodePool pool{3};
};

std::unique_ptr<StreamReader> Reader(const Stream& stream) {
  StreamInfo info;
  info.ring_bytes = stream.ring_bytes();
  info.batches_per_epoch = stream.batches_per_epoch();
  auto reader = sdk::OpenRingReader(dup(stream.ring_fd()), info, [] { return true; }, nullptr);
  REQUIRE(reader.ok());
  return std::move(reader).value();
}

StreamParams Params(uint32_t batch, uint32_t epochs) {
  StreamParams p;
  p.job = "j";
  p.dataset = "fake";
  p.batch_size = batch;
  p.seed = 11;
  p.epochs = epochs;
  p.slots = 3;
  return p;
}

TEST_CASE("a decoding source is spread over the pool and lands in place, row by row") {
  Harness h;
  auto source = std::make_shared<FakeSource>(100, /*parallel=*/true);
  source->RequireTwoThreads();
  auto stream = Stream::Start(1, *h.env, h.ledger, source->info(), Ready(source), &h.pool,
                              Params(32, 2));
  REQUIRE(stream.ok());
  auto reader = Reader(**stream);
  std::set<int32_t> decoders;
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int32_t> ids;
    while (true) {
      auto next = reader->Next();
      REQUIRE(next.ok());
      if (!next->has_value()) break;
      const RawBatch& b = **next;
      CHECK(b.epoch == epoch);
      const auto* image = static_cast<const int32_t*>(b.tensors[0].data);
      const auto* label = static_cast<const uint8_t*>(b.tensors[1].data);
      for (uint32_t r = 0; r < b.num_samples; ++r) {
        ids.insert(image[4 * r]);
        CHECK(image[4 * r + 1] == 11);
        CHECK(image[4 * r + 2] == static_cast<int32_t>(epoch));
        CHECK(label[r] == image[4 * r] % 7);
        decoders.insert(image[4 * r + 3]);
      }
    }
    CHECK(ids.size() == 100);
    CHECK(std::set<int32_t>(ids.begin(), ids.end()).size() == 100);
  }
  // The pool's threads did the decoding, more than one of them.
  CHECK(decoders.size() >= 2);
  // Every batch but each epoch's first was announced before it was decoded: batches of
  // 32, 32, 32 and 4 per epoch, so 68 ids per epoch.
  CHECK(source->prefetched().size() == 2 * 68);
}

TEST_CASE("an in-memory source is filled inline by the producer") {
  Harness h;
  auto source = std::make_shared<FakeSource>(40, /*parallel=*/false);
  auto stream = Stream::Start(1, *h.env, h.ledger, source->info(), Ready(source), &h.pool,
                              Params(8, 1));
  REQUIRE(stream.ok());
  auto reader = Reader(**stream);
  std::set<int32_t> decoders;
  uint64_t rows = 0;
  while (true) {
    auto next = reader->Next();
    REQUIRE(next.ok());
    if (!next->has_value()) break;
    const auto* image = static_cast<const int32_t*>((*next)->tensors[0].data);
    for (uint32_t r = 0; r < (*next)->num_samples; ++r) decoders.insert(image[4 * r + 3]);
    rows += (*next)->num_samples;
  }
  CHECK(rows == 40);
  CHECK(decoders.size() == 1);
}

TEST_CASE("a corrupt sample in a parallel batch ends the stream with its message") {
  Harness h;
  auto source = std::make_shared<FakeSource>(64, /*parallel=*/true, /*bad=*/13);
  auto stream = Stream::Start(1, *h.env, h.ledger, source->info(), Ready(source), &h.pool,
                              Params(64, 1));
  REQUIRE(stream.ok());
  auto reader = Reader(**stream);
  auto next = reader->Next();
  REQUIRE_FALSE(next.ok());
  CHECK(next.status().code() == StatusCode::kDataLoss);
  CHECK(next.status().message().find("sample 13") != std::string::npos);
  CHECK(next.status().message().find("/data/fake.bin: corrupt at byte 42") != std::string::npos);
}

TEST_CASE("under on_error: skip a corrupt sample is left out of its batch and counted") {
  Harness h;
  for (bool parallel : {true, false}) {
    auto source = std::make_shared<FakeSource>(64, parallel, /*bad=*/13, "skip");
    JobLedger ledger;
    auto stream = Stream::Start(1, *h.env, ledger, source->info(), Ready(source), &h.pool,
                                Params(64, 2));
    REQUIRE(stream.ok());
    auto reader = Reader(**stream);
    for (int epoch = 0; epoch < 2; ++epoch) {
      auto next = reader->Next();
      REQUIRE(next.ok());
      REQUIRE(next->has_value());
      const RawBatch& b = **next;
      REQUIRE(b.num_samples == 63);
      CHECK(b.tensors[0].shape[0] == 63);
      CHECK(b.tensors[1].nbytes == 63);
      const auto* image = static_cast<const int32_t*>(b.tensors[0].data);
      const auto* label = static_cast<const uint8_t*>(b.tensors[1].data);
      std::set<int32_t> ids;
      for (uint32_t r = 0; r < b.num_samples; ++r) {
        ids.insert(image[4 * r]);
        CHECK(label[r] == image[4 * r] % 7);  // rows moved as whole samples
      }
      CHECK(ids.size() == 63);
      CHECK(ids.count(13) == 0);
      next = reader->Next();  // end of the epoch
      REQUIRE(next.ok());
      CHECK_FALSE(next->has_value());
    }
    CHECK((*stream)->Stats().samples_skipped == 2);
  }
}

}  // namespace
}  // namespace ember::daemon
