// Remote decode workers without a network, in one process: a stream sends parts of its
// batches through RemoteDecoders to fake worker channels (each decoding with its own copy
// of the source, straight into the slot), and the SDK's ring reader checks
// every row. A worker that fails mid-epoch loses its parts to this node; nothing is lost
// or served twice. (The same over real daemons and TLS: tests/netns_multinode_test.)
#include "daemon/decode/remote_decoders.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
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

constexpr uint64_t kSeed = 9;

// A worker daemon's decode pool, faked: its own copy of the data, decoded on the loop.
class WorkerChannel : public DecodeChannel {
 public:
  explicit WorkerChannel(uint64_t count) : source_(count) {}
  Result<RemoteAnswer> Decode(const DecodeRequest& request, const RowsDestination& into,
                              std::chrono::steady_clock::time_point) override {
    ++calls;
    if (down.load()) return Unavailable("connection to worker lost");
    const size_t n = request.ids.size();
    for (size_t r = 0; r < n; ++r) {
      void* dsts[2] = {into.tensors[0] + r * into.row_bytes[0],
                       into.tensors[1] + r * into.row_bytes[1]};
      Status read = source_.ReadSample(request.ids[r], SampleContext{request.seed, request.epoch}, dsts);
      if (!read.ok()) return read;
    }
    rows += n;
    RemoteAnswer answer;
    answer.bytes = into.Bytes(n);
    return answer;
  }
  void Cancel() override { down = true; }
  std::atomic<bool> down{false};
  std::atomic<uint64_t> calls{0}, rows{0};

 private:
  PatternSource source_;
};

// RemoteDecoders over `workers`, retrying a failed one after 50 ms.
std::unique_ptr<RemoteDecoders> Decoders(std::vector<RemoteDecoders::Worker> workers) {
  RemoteDecodersOptions options;
  options.retry_after = std::chrono::milliseconds(50);
  return std::make_unique<RemoteDecoders>(std::move(workers), options);
}

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
  auto decoders = Decoders({{"one:7000", &one}, {"two:7000", &two}});
  auto source = std::make_shared<PatternSource>(kCount);
  std::unique_ptr<Env> env = NewPosixEnv();
  JobLedger ledger;
  DecodePool pool(2);
  auto stream = StartStream(2, decoders.get(), source, ledger, pool, *env);
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
  auto stats = decoders->Stats();
  CHECK(stats[1].failed_calls > 0);
  CHECK_FALSE(stats[1].up);
  CHECK(stats[0].rows == one.rows);
}

TEST_CASE("a worker that comes back gets its share again") {
  constexpr uint64_t kCount = 640;
  WorkerChannel one(kCount);
  one.down = true;
  auto decoders = Decoders({{"one:7000", &one}});
  auto source = std::make_shared<PatternSource>(kCount);
  std::unique_ptr<Env> env = NewPosixEnv();
  JobLedger ledger;
  DecodePool pool(2);
  auto stream = StartStream(1, decoders.get(), source, ledger, pool, *env);
  auto reader = ReaderOf(*stream);
  auto epochs = ReadPatternRows(*reader, kSeed, [&](int batches) {
    if (batches != 10) return;
    one.down = false;  // restarted
    std::this_thread::sleep_for(std::chrono::milliseconds(120));  // past its retry time
  });
  CHECK(epochs[0] == AllIds(kCount));
  CHECK(one.rows > 0);
  CHECK(decoders->Stats()[0].up);
}

}  // namespace
}  // namespace ember::daemon
