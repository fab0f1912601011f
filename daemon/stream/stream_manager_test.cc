// StreamManager without RPC: opening and closing streams over a fake source.
#include "daemon/stream/stream_manager.h"

#include "daemon/coordinator/job_ledger.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/stream/stream_testing.h"

namespace ember::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long a blocked read lasts unless the test lets it go: a Close that waits for the
// producer takes this long.
constexpr milliseconds kBlockLimit{5000};

// A manager over a catalog that holds one dataset, "fake", whose samples come from
// `source`.
struct Harness {
  explicit Harness(const std::string& name) {
    auto probe = [info = source->info()](const DatasetSpec& spec, const DatasetOwner&,
                                         IndexingProgress*) {
      DatasetInfo probed = info;
      probed.spec = spec;
      return Result<DatasetInfo>(probed);
    };
    auto catalog_or = Catalog::Open(env.get(), FreshTestDir(name), probe);
    REQUIRE(catalog_or.ok());
    catalog = std::move(catalog_or).value();
    REQUIRE(catalog->Add(DatasetSpec{"fake", "idx", "/data/fake", "train"}).ok());
    streams = std::make_unique<StreamManager>(
        env.get(), catalog.get(), &ledger,
        [source = source](const DatasetInfo&) { return Ready(source); }, &pool, StreamLimits{});
  }

  // Rank `rank` of job "j" (2 ranks, batch 8), `slots` deep (0: the default).
  static StreamParams Params(uint32_t rank, uint32_t slots = 2) {
    StreamParams params;
    params.job = "j";
    params.dataset = "fake";
    params.batch_size = 8;
    params.world_size = 2;
    params.rank = rank;
    params.slots = slots;
    return params;
  }

  // Opens rank `rank` of job "j" and returns the stream's id.
  uint64_t Open(uint32_t rank = 0) {
    auto stream = streams->Open(Params(rank));
    REQUIRE(stream.ok());
    return (*stream)->id();
  }

  std::unique_ptr<Env> env = NewPosixEnv();
  std::shared_ptr<FakeSource> source = std::make_shared<FakeSource>(64, /*parallel=*/false);
  std::unique_ptr<Catalog> catalog;
  JobLedger ledger;
  DecodePool pool{2};
  std::unique_ptr<StreamManager> streams;
};

TEST_CASE("closing a stream does not wait for a producer blocked in its source") {
  Harness h("close");
  h.source->Block(kBlockLimit);
  const uint64_t id = h.Open();
  const uint64_t ring_bytes = h.streams->shm_bytes_in_use();
  CHECK(ring_bytes > 0);
  REQUIRE(h.source->WaitUntilBlocked(milliseconds(5000)));

  const auto start = Clock::now();
  h.streams->Close(id);
  CHECK(Clock::now() - start < milliseconds(1000));
  CHECK(h.streams->Stats().empty());
  // The producer is still reading into the ring: its memory is still in use.
  CHECK(h.streams->shm_bytes_in_use() == ring_bytes);

  // The rank left the job at once, so it can open again while the old producer runs.
  const uint64_t again = h.Open();
  CHECK(again != id);
  CHECK(h.streams->shm_bytes_in_use() == 2 * ring_bytes);
  h.streams->Close(again);

  // Once the producers stop, the memory returns.
  h.source->Unblock();
  const auto deadline = Clock::now() + milliseconds(5000);
  while (h.streams->shm_bytes_in_use() != 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  CHECK(h.streams->shm_bytes_in_use() == 0);
  CHECK(h.ledger.Summaries().size() == 1);  // rank 1 never came: the job stays
}

TEST_CASE("destroying the manager stops and waits for every producer") {
  Harness h("destroy");
  h.source->Block(milliseconds(300));
  h.Open(0);
  h.Open(1);
  REQUIRE(h.source->WaitUntilBlocked(milliseconds(5000)));
  h.streams.reset();
  // No producer holds the source any more, and both ranks left: the job is forgotten.
  CHECK(h.source.use_count() == 1);
  CHECK(h.ledger.Summaries().empty());
}

TEST_CASE("closing an unknown stream is a no-op") {
  Harness h("unknown");
  const uint64_t id = h.Open();
  h.streams->Close(id + 1);
  CHECK(h.streams->Stats().size() == 1);
}

TEST_CASE("draining refuses new streams and lets the batch being written finish") {
  Harness h("drain");
  h.source->Block(kBlockLimit);
  const uint64_t id = h.Open(0);
  REQUIRE(h.source->WaitUntilBlocked(milliseconds(5000)));
  CHECK(h.streams->BatchesInFlight() == 1);

  h.streams->BeginDrain();
  const StreamParams params = Harness::Params(1, 0);
  auto refused = h.streams->Open(params);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK(refused.status().message() == "emberd is shutting down: no new streams");
  // The batch in progress is not cut off by the drain...
  std::this_thread::sleep_for(milliseconds(100));
  CHECK(h.streams->BatchesInFlight() == 1);
  // ...it finishes and is published, and no other is started.
  h.source->Unblock();
  const auto deadline = Clock::now() + milliseconds(5000);
  while (h.streams->BatchesInFlight() != 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  CHECK(h.streams->BatchesInFlight() == 0);
  std::this_thread::sleep_for(milliseconds(100));
  const std::vector<StreamStats> stats = h.streams->Stats();
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].batches_published == 1);  // two slots: one more would have fit
  h.streams->Close(id);
}

TEST_CASE("SetBudget applies to streams opened from then on") {
  Harness h("budget");
  const uint64_t id = h.Open(0);
  const uint64_t ring_bytes = h.streams->shm_bytes_in_use();
  h.streams->SetBudget(ring_bytes + ring_bytes / 2, 2);
  CHECK(h.streams->shm_bytes_budget() == ring_bytes + ring_bytes / 2);
  const StreamParams params = Harness::Params(1, 0);
  auto over = h.streams->Open(params);
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().code() == StatusCode::kResourceExhausted);
  h.streams->SetBudget(4 * ring_bytes, 2);
  auto fits = h.streams->Open(params);
  REQUIRE(fits.ok());
  CHECK((*fits)->slot_count() == 2);  // the new default depth
  h.streams->Close(id);
  h.streams->Close((*fits)->id());
}

TEST_CASE("a second stream of a rank already reading is told which stream holds it") {
  Harness h("stream_manager_second_reader");
  const uint64_t first = h.Open(0);
  StreamParams again = Harness::Params(0);
  again.start_position = 8;  // another start: still refused as a second reader, not as that
  auto second = h.streams->Open(again);
  REQUIRE(second.status().code() == StatusCode::kAlreadyExists);
  CHECK(second.status().message() ==
        "job 'j': rank 0 is already joined: stream " + std::to_string(first) +
            " (dataset 'fake') reads it; close that Loader first, or open another rank");
  h.streams->Close(first);
  CHECK(h.streams->Open(again).ok());
}

TEST_CASE("a rejoin's count of batches received is bounded before anything is built") {
  Harness h("stream_manager_rejoin_bound");
  StreamParams params = Harness::Params(0);
  params.rejoin = true;
  params.rejoin_received = ~uint64_t{0};  // was an entry per batch, on the event loop
  auto refused = h.streams->Open(params);
  REQUIRE(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message() ==
        "rejoin_received: 18446744073709551615 is more than the 4 batches a rank of 2 gets "
        "of dataset 'fake' in an epoch");
  params.rejoin_received = 4;  // the whole epoch: it goes on with the next one
  CHECK(h.streams->Open(params).ok());
}

TEST_CASE("a world larger than max_world_size is refused") {
  Harness h("stream_manager_world_bound");
  StreamParams params = Harness::Params(0);
  params.world_size = 1000000;
  auto refused = h.streams->Open(params);
  REQUIRE(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message() ==
        "world_size: 1000000 is more than 65536 ranks (max_world_size)");
}

TEST_CASE("share groups: one per name, refused when their order differs, freed with their last stream") {
  Harness h("share");
  StreamParams a = Harness::Params(0);
  a.job = "a";
  a.world_size = 1;
  a.seed = 3;
  a.share = "hp-search";
  auto first = h.streams->Open(a);
  REQUIRE(first.ok());
  REQUIRE((*first)->group() != nullptr);
  CHECK((*first)->shared_fd() >= 0);
  const uint64_t ring_bytes = (*first)->ring_bytes();
  const uint64_t group_bytes = (*first)->group()->bytes();
  CHECK(h.streams->shm_bytes_in_use() == ring_bytes + group_bytes);

  StreamParams b = a;
  b.job = "b";
  b.batch_size = 12;
  auto second = h.streams->Open(b);
  REQUIRE(second.ok());
  CHECK((*second)->group() == (*first)->group());  // the group's rows are reserved once
  CHECK(h.streams->shm_bytes_in_use() == (*first)->ring_bytes() + (*second)->ring_bytes() + group_bytes);

  StreamParams c = a;
  c.job = "c";
  c.seed = 4;
  auto other_seed = h.streams->Open(c);
  REQUIRE_FALSE(other_seed.ok());
  CHECK(other_seed.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(other_seed.status().message(),
             Catch::Contains("share group 'hp-search' reads with seed 3") &&
                 Catch::Contains("asks for seed 4"));
  c.seed = 3;
  c.share = "no spaces";
  auto bad_name = h.streams->Open(c);
  REQUIRE_FALSE(bad_name.ok());
  CHECK_THAT(bad_name.status().message(), Catch::StartsWith("share: 'no spaces' is not a group name"));
  c.share = "hp-search";
  c.coordinator = "10.0.0.1:7000";
  auto remote = h.streams->Open(c);
  REQUIRE_FALSE(remote.ok());
  CHECK_THAT(remote.status().message(), Catch::Contains("cannot share"));

  h.streams->Close((*first)->id());
  h.streams->Close((*second)->id());
  first->reset();
  second->reset();
  const auto deadline = Clock::now() + milliseconds(5000);
  while (h.streams->shm_bytes_in_use() != 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  CHECK(h.streams->shm_bytes_in_use() == 0);  // the group went with its last stream
}

}  // namespace
}  // namespace ember::daemon
