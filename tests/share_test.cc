// Share groups without RPC, in one process: the streams of several jobs read one
// ShareGroup's rows through the SDK's ring reader (the rows' tensor mapped read-only,
// twice back to back), each job at its own pace. (Under tests/: it links both the daemon
// and the SDK.)
#include "daemon/stream/share_group.h"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "daemon/coordinator/job_ledger.h"
#include "daemon/stream/stream.h"
#include "daemon/stream/stream_testing.h"
#include "tests/support/ring_reader_testing.h"

namespace ember::daemon {
namespace {

using std::chrono::milliseconds;


struct Harness {
  // `hold_ms`: how long the group waits for a slow member; long by default, so that a
  // loaded machine's pauses never let a member go where a test expects it waited for.
  explicit Harness(uint64_t count, uint64_t window_rows, uint64_t hold_ms = 30000)
      : source(std::make_shared<PatternSource>(count)) {
    ShareGroup::Params p;
    p.name = "g";
    p.seed = 5;
    p.shuffle = true;
    p.rows = window_rows;
    p.step_rows = 8;
    p.hold_ms = hold_ms;
    auto created = ShareGroup::Create(*env, source->info(), &pool, p);
    REQUIRE(created.ok());
    group = std::move(created).value();
  }
  std::unique_ptr<Stream> Start(const std::string& job, uint32_t batch, uint32_t epochs,
                                uint32_t slots = 3) {
    StreamParams p;
    p.job = job;
    p.dataset = "rows";
    p.batch_size = batch;
    p.seed = 5;
    p.epochs = epochs;
    p.slots = slots;
    p.sample_ids = true;
    p.share = "g";
    auto stream = Stream::Start(next_id++, *env, ledger, source->info(), Ready(source), &pool, p,
                                group);
    REQUIRE(stream.ok());
    return std::move(stream).value();
  }
  std::unique_ptr<Env> env = NewPosixEnv();
  std::shared_ptr<PatternSource> source;
  JobLedger ledger;
  DecodePool pool{2};
  std::shared_ptr<ShareGroup> group;
  uint64_t next_id = 1;
};


// The harness's seed.
std::vector<uint64_t> CheckRows(const RawBatch& b) { return CheckPatternRows(b, 5); }
std::map<uint64_t, std::multiset<uint64_t>> ReadAll(StreamReader& reader) {
  return ReadPatternRows(reader, 5);
}

TEST_CASE("three jobs with different batch sizes share one decoding: each reads every sample once") {
  Harness h(200, /*window_rows=*/512);  // the whole epoch fits: nothing is written over
  auto a = h.Start("a", 8, 1), b = h.Start("b", 12, 1), c = h.Start("c", 20, 1);
  std::map<std::string, std::map<uint64_t, std::multiset<uint64_t>>> read;
  std::mutex mu;
  std::vector<std::thread> readers;
  for (auto* s : {a.get(), b.get(), c.get()})
    readers.emplace_back([&, s] {
      auto reader = ReaderOf(*s);
      auto epochs = ReadAll(*reader);
      std::lock_guard<std::mutex> lock(mu);
      read[s->params().job] = std::move(epochs);
    });
  for (auto& t : readers) t.join();
  for (const char* job : {"a", "b", "c"}) {
    INFO(job);
    REQUIRE(read[job].size() == 1);
    CHECK(read[job][0] == AllIds(200));
  }
  // Every sample decoded once for the three jobs, and every batch came from the group.
  const auto decoded = h.source->decoded();
  CHECK(decoded.size() == 200);
  for (const auto& [key, n] : decoded) CHECK(n == 1);
  CHECK(h.group->stats().rows_decoded == 200);
  CHECK(a->Stats().shared_batches == 25);
  CHECK(b->Stats().shared_batches == 17);
  CHECK(c->Stats().shared_batches == 10);
}

TEST_CASE("a job that stops reading holds only the rows of its batches; the others go on") {
  Harness h(400, /*window_rows=*/48, /*hold_ms=*/300);
  auto slow = h.Start("slow", 8, 1), fast = h.Start("fast", 8, 1);
  auto slow_reader = ReaderOf(*slow);
  std::vector<RawBatch> held;  // its slots stay with the reader
  for (int i = 0; i < 2; ++i) {
    auto next = slow_reader->Next();
    REQUIRE(next.ok());
    REQUIRE(next->has_value());
    held.push_back(std::move(**next));
  }
  const auto began = std::chrono::steady_clock::now();
  auto fast_reader = ReaderOf(*fast);
  auto epochs = ReadAll(*fast_reader);
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(20));
  CHECK(epochs[0] == AllIds(400));
  CHECK(fast->Stats().shared_batches > 25);  // most of 50: some straddle the held rows
  // The held batches still read their own rows: the group wrote around them.
  for (const RawBatch& b : held) CheckRows(b);
  held.clear();
  // The slow job, far behind the window now, decodes its own batches, the same bytes.
  auto rest = ReadAll(*slow_reader);
  CHECK(rest[0].size() == 400 - 16);
}

TEST_CASE("the group waits for a member that falls behind for a while: nothing is decoded twice") {
  Harness h(400, /*window_rows=*/48);
  auto steady = h.Start("steady", 8, 1), pausing = h.Start("pausing", 8, 1);
  std::map<uint64_t, std::multiset<uint64_t>> steady_read;
  std::thread steady_thread([&] { steady_read = ReadAll(*ReaderOf(*steady)); });
  auto reader = ReaderOf(*pausing);
  std::multiset<uint64_t> pausing_read;
  for (int i = 0; i < 5; ++i) {
    auto next = reader->Next();
    REQUIRE(next.ok());
    for (uint64_t id : CheckRows(**next)) pausing_read.insert(id);
  }
  std::this_thread::sleep_for(milliseconds(300));  // a slow step: far more than the window
  for (const auto& [epoch, ids] : ReadAll(*reader)) pausing_read.insert(ids.begin(), ids.end());
  steady_thread.join();
  CHECK(steady_read[0] == AllIds(400));
  CHECK(pausing_read == AllIds(400));
  CHECK(steady->Stats().shared_batches == 50);
  CHECK(pausing->Stats().shared_batches == 50);
  for (const auto& [key, n] : h.source->decoded()) CHECK(n == 1);
}

TEST_CASE("a member whose stream closes mid-epoch does not hold the group") {
  Harness h(400, /*window_rows=*/48);
  auto gone = h.Start("gone", 8, 1), stays = h.Start("stays", 8, 1);
  {
    auto reader = ReaderOf(*gone);
    auto next = reader->Next();
    REQUIRE(next.ok());
    REQUIRE(next->has_value());
    gone->Stop();  // the trainer died: its connection closed the stream
  }
  auto epochs = ReadAll(*ReaderOf(*stays));
  CHECK(epochs[0] == AllIds(400));
  CHECK(stays->Stats().shared_batches == 50);
  CHECK(h.group->stats().members == 1);
}

TEST_CASE("a job that joins after the group wrote over the first rows starts at the next epoch") {
  Harness h(200, /*window_rows=*/48);
  auto first = h.Start("first", 8, 2);
  auto first_reader = ReaderOf(*first);
  std::map<uint64_t, std::multiset<uint64_t>> first_read;
  for (int i = 0; i < 10; ++i) {  // 80 rows: row 0 is gone
    auto next = first_reader->Next();
    REQUIRE(next.ok());
    for (uint64_t id : CheckRows(**next)) first_read[(*next)->epoch].insert(id);
  }
  auto late = h.Start("late", 8, 1);
  CHECK(late->params().start_epoch == 1);
  CHECK(late->params().epochs == 2);
  std::map<uint64_t, std::multiset<uint64_t>> late_read;
  std::thread late_thread([&] { late_read = ReadAll(*ReaderOf(*late)); });
  for (const auto& [epoch, ids] : ReadAll(*first_reader))
    first_read[epoch].insert(ids.begin(), ids.end());
  late_thread.join();
  CHECK(first_read[0] == AllIds(200));
  CHECK(first_read[1] == AllIds(200));
  REQUIRE(late_read.size() == 1);
  CHECK(late_read[1] == AllIds(200));
  CHECK(late->Stats().shared_batches > 0);
}

TEST_CASE("the group's memfd takes no writable mapping from anyone else") {
  Harness h(10, 16);
  const int fd = dup(h.group->fd());
  const size_t bytes = h.group->bytes();
  CHECK(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
  void* ro = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  REQUIRE(ro != MAP_FAILED);
  CHECK(mprotect(ro, bytes, PROT_READ | PROT_WRITE) != 0);
  munmap(ro, bytes);
  close(fd);
}

}  // namespace
}  // namespace ember::daemon
