// Stream without RPC, in one process: a producer fills a real ring from a Source,
// spreading decoding sources over the decode pool, and the SDK's ring reader reads it
// back. (Under tests/: it links both the daemon and the SDK.)
#include "daemon/stream/stream.h"

#include "daemon/coordinator/job_ledger.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "daemon/stream/stream_testing.h"
#include "tests/support/ring_reader_testing.h"

namespace ember::daemon {
namespace {

struct Harness {
  std::unique_ptr<Env> env = NewPosixEnv();
  JobLedger ledger;
  DecodePool pool{3};
};


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
  auto reader = ReaderOf(**stream);
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

TEST_CASE("the next batch starts decoding while the last row of the one before it finishes") {
  Harness h;  // 3 decode threads
  auto source = std::make_shared<FakeSource>(12, /*parallel=*/true);
  // Unshuffled batches of 4: {0..3}, {4..7}, {8..11}. Sample 0 takes long: while one
  // thread is on it, the others run out of batch 0's rows and go on to batch 1.
  source->Block(std::chrono::seconds(10), {0});
  StreamParams params = Params(4, 1);
  params.shuffle = false;
  auto stream = Stream::Start(1, *h.env, h.ledger, source->info(), Ready(source), &h.pool, params);
  REQUIRE(stream.ok());
  CHECK(source->WaitUntilBlocked(std::chrono::seconds(5)));
  CHECK(source->WaitUntilRead(7, std::chrono::seconds(5)));  // batch 1, while 0 is unfinished
  CHECK_FALSE(source->WaitUntilRead(8, std::chrono::milliseconds(200)));  // not a third
  source->Unblock();
  auto reader = ReaderOf(**stream);
  std::vector<int32_t> ids;
  uint64_t index = 0;
  while (true) {
    auto next = reader->Next();
    REQUIRE(next.ok());
    if (!next->has_value()) break;
    CHECK((*next)->index_in_epoch == index++);  // published in lease order
    const auto* image = static_cast<const int32_t*>((*next)->tensors[0].data);
    for (uint32_t r = 0; r < (*next)->num_samples; ++r) ids.push_back(image[4 * r]);
  }
  CHECK(index == 3);
  CHECK(ids == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // Both slots in flight were taken within the depth.
  CHECK((*stream)->Stats().slots_touched <= RingWriter::kInitialDepth);
}

TEST_CASE("an in-memory source is filled inline by the producer") {
  Harness h;
  auto source = std::make_shared<FakeSource>(40, /*parallel=*/false);
  auto stream = Stream::Start(1, *h.env, h.ledger, source->info(), Ready(source), &h.pool,
                              Params(8, 1));
  REQUIRE(stream.ok());
  auto reader = ReaderOf(**stream);
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
  auto reader = ReaderOf(**stream);
  auto next = reader->Next();
  REQUIRE_FALSE(next.ok());
  CHECK(next.status().code() == StatusCode::kDataLoss);
  CHECK(next.status().message().find("sample 13") != std::string::npos);
  CHECK(next.status().message().find("/data/fake.bin: corrupt at byte 42") != std::string::npos);
  CHECK((*stream)->Stats().decode_errors == 1);
  CHECK((*stream)->Stats().samples_skipped == 0);
}

TEST_CASE("under on_error: skip a corrupt sample is left out of its batch and counted") {
  Harness h;
  for (bool parallel : {true, false}) {
    auto source = std::make_shared<FakeSource>(64, parallel, /*bad=*/13, "skip");
    JobLedger ledger;
    auto stream = Stream::Start(1, *h.env, ledger, source->info(), Ready(source), &h.pool,
                                Params(64, 2));
    REQUIRE(stream.ok());
    auto reader = ReaderOf(**stream);
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
    const StreamStats stats = (*stream)->Stats();
    CHECK(stats.samples_skipped == 2);
    CHECK(stats.decode_errors == 2);
    // 63 samples delivered per epoch, of 4 x int32 + 1 uint8 bytes each.
    CHECK(stats.samples_published == 126);
    CHECK(stats.bytes_published == 126 * 17);
  }
}

TEST_CASE("the time the reader waited for a batch is the stream's data stall") {
  Harness h;
  auto source = std::make_shared<FakeSource>(16, /*parallel=*/false);
  source->Block(std::chrono::seconds(10));
  auto stream = Stream::Start(1, *h.env, h.ledger, source->info(), Ready(source), &h.pool,
                              Params(4, 1));
  REQUIRE(stream.ok());
  auto reader = ReaderOf(**stream);
  REQUIRE(source->WaitUntilBlocked(std::chrono::seconds(10)));
  CHECK((*stream)->Stats().data_stall_seconds == 0);
  std::thread unblock([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    source->Unblock();
  });
  auto next = reader->Next();  // waits until the source is unblocked
  unblock.join();
  REQUIRE(next.ok());
  REQUIRE(next->has_value());
  const double stall = (*stream)->Stats().data_stall_seconds;
  CHECK(stall >= 0.25);
  CHECK(stall == Approx(std::chrono::duration<double>(reader->wait_time()).count()));
  CHECK(stall < 10);
}

}  // namespace
}  // namespace ember::daemon
