// Remote decode workers without a network, in one process: a stream sends parts of its
// batches through RemoteDecoders to fake worker channels (each decoding with its own copy
// of the source, on the channels' event loop thread), and the SDK's ring reader checks
// every row. A worker that fails mid-epoch loses its parts to this node; nothing is lost
// or served twice. (The same over real daemons and TLS: tests/remote_decode_netns_test.)
#include "daemon/decode/remote_decoders.h"

#include <kj/async-io.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "daemon/coordinator/job_ledger.h"
#include "daemon/stream/stream.h"
#include "daemon/stream/stream_testing.h"
#include "tests/support/ring_reader_testing.h"

namespace ember::daemon {
namespace {

constexpr uint64_t kRowBytes = PatternSource::kRowBytes;
constexpr uint64_t kSeed = 9;

// A worker daemon's decode pool, faked: its own copy of the data, decoded on the loop.
class WorkerChannel : public DecodeChannel {
 public:
  explicit WorkerChannel(uint64_t count) : source_(count) {}
  kj::Promise<Result<RemoteRows>> Decode(const DecodeRequest& request) override {
    ++calls;
    if (down.load()) return Result<RemoteRows>(Unavailable("connection to worker lost"));
    const size_t n = request.ids.size();
    auto bytes = std::make_shared<std::vector<uint8_t>>(n * (kRowBytes + 8));
    for (size_t r = 0; r < n; ++r) {
      void* dsts[2] = {bytes->data() + r * kRowBytes, bytes->data() + n * kRowBytes + r * 8};
      Status read = source_.ReadSample(request.ids[r], SampleContext{request.seed, request.epoch}, dsts);
      if (!read.ok()) return Result<RemoteRows>(read);
    }
    rows += n;
    RemoteRows answer;
    answer.data = bytes->data();
    answer.size = bytes->size();
    answer.hold = bytes;
    return Result<RemoteRows>(std::move(answer));
  }
  std::atomic<bool> down{false};
  std::atomic<uint64_t> calls{0}, rows{0};

 private:
  PatternSource source_;
};

// The channels' event loop on a thread of its own, with RemoteDecoders made on it.
class WorkerLoop {
 public:
  explicit WorkerLoop(std::vector<RemoteDecoders::Worker> workers) {
    std::promise<RemoteDecoders*> made;
    auto ready = made.get_future();
    thread_ = std::thread([this, workers, &made] {
      kj::AsyncIoContext io = kj::setupAsyncIo();
      RemoteDecodersOptions options;
      options.retry_after = std::chrono::milliseconds(50);
      auto decoders = std::make_unique<RemoteDecoders>(io.provider->getTimer(), workers, options);
      auto stop = kj::newPromiseAndCrossThreadFulfiller<void>();
      stop_ = kj::mv(stop.fulfiller);
      made.set_value(decoders.get());
      stop.promise.wait(io.waitScope);
      decoders->Shutdown();
      io.waitScope.poll();
      decoders.reset();
    });
    decoders_ = ready.get();
  }
  ~WorkerLoop() {
    stop_->fulfill();
    thread_.join();
  }
  RemoteDecoders& decoders() { return *decoders_; }

 private:
  std::thread thread_;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop_;
  RemoteDecoders* decoders_ = nullptr;
};

std::unique_ptr<Stream> StartStream(uint32_t epochs, RemoteDecoders* remote,
                                    const std::shared_ptr<PatternSource>& source,
                                    JobLedger& ledger, DecodePool& pool, Env& env) {
  StreamParams p;
  p.job = "remote";
  p.dataset = "rows";
  p.batch_size = 16;
  p.seed = kSeed;
  p.epochs = epochs;
  p.slots = 3;
  p.sample_ids = true;
  auto stream = Stream::Start(1, env, ledger, source->info(), Ready(source), &pool, p, nullptr,
                              remote);
  REQUIRE(stream.ok());
  return std::move(stream).value();
}

TEST_CASE("workers decode parts of each batch; a worker that fails mid-epoch loses them here") {
  constexpr uint64_t kCount = 320;
  WorkerChannel one(kCount), two(kCount);
  WorkerLoop loop({{"one:7000", &one}, {"two:7000", &two}});
  auto source = std::make_shared<PatternSource>(kCount);
  std::unique_ptr<Env> env = NewPosixEnv();
  JobLedger ledger;
  DecodePool pool(2);
  auto stream = StartStream(2, &loop.decoders(), source, ledger, pool, *env);
  auto reader = ReaderOf(*stream);
  auto epochs = ReadPatternRows(*reader, kSeed, [&](int batches) {
    if (batches == 10) two.down = true;  // killed after 10 batches
  });
  CHECK(epochs[0] == AllIds(kCount));
  CHECK(epochs[1] == AllIds(kCount));
  // Both workers did part of the work, this node the rest; worker two's failed calls
  // were decoded here (every sample is still there once per epoch).
  CHECK(one.rows > 0);
  CHECK(two.rows > 0);
  const uint64_t here = source->decoded().size();
  CHECK(here > 0);
  CHECK(stream->Stats().remote_rows == one.rows + two.rows);
  CHECK(stream->Stats().remote_rows + [&] {
    uint64_t n = 0;
    for (const auto& [key, times] : source->decoded()) n += times;
    return n;
  }() == 2 * kCount);
  auto stats = loop.decoders().Stats();
  CHECK(stats[1].failed_calls > 0);
  CHECK_FALSE(stats[1].up);
  CHECK(stats[0].rows == one.rows);
}

TEST_CASE("a worker that comes back gets its share again") {
  constexpr uint64_t kCount = 640;
  WorkerChannel one(kCount);
  one.down = true;
  WorkerLoop loop({{"one:7000", &one}});
  auto source = std::make_shared<PatternSource>(kCount);
  std::unique_ptr<Env> env = NewPosixEnv();
  JobLedger ledger;
  DecodePool pool(2);
  auto stream = StartStream(1, &loop.decoders(), source, ledger, pool, *env);
  auto reader = ReaderOf(*stream);
  auto epochs = ReadPatternRows(*reader, kSeed, [&](int batches) {
    if (batches != 10) return;
    one.down = false;  // restarted
    std::this_thread::sleep_for(std::chrono::milliseconds(120));  // past its retry time
  });
  CHECK(epochs[0] == AllIds(kCount));
  CHECK(one.rows > 0);
  CHECK(loop.decoders().Stats()[0].up);
}

}  // namespace
}  // namespace ember::daemon
