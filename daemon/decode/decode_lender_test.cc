// DecodeLender without RPC: the rows it serves, the rows that fail, each refusal, its limits
// and that every request is answered exactly once.
#include "daemon/decode/decode_lender.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "daemon/decode/decode_testing.h"
#include "daemon/stream/stream_testing.h"

namespace ember::daemon {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kFingerprint = kRowsFingerprint;
constexpr uint64_t kCount = kRowsCount;

// One answer: what done got, and how often it was called.
struct Answer {
  void Set(Result<DecodedRows> r) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    result = std::move(r);
    cv.notify_all();
  }
  DecodeLender::Done Done() {
    return [this](Result<DecodedRows> r) { Set(std::move(r)); };
  }
  // Waits up to 10 s for the first answer.
  Result<DecodedRows> Wait() {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return calls > 0; }));
    return result;
  }
  int Calls() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }

  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  Result<DecodedRows> result = Internal("no answer");
};

// A lender over RowsCatalog, whose datasets' samples come from `source` (or `loader`).
struct Harness {
  explicit Harness(const std::string& name, DecodeLenderLimits limits = {},
                   DecodeLender::SourceLoader loader = nullptr) {
    catalog = RowsCatalog(env.get(), name);
    REQUIRE(catalog != nullptr);
    if (!loader) loader = [this](const DatasetInfo&) { return Ready(source); };
    lender = std::make_unique<DecodeLender>(catalog.get(), std::move(loader), &pool, limits);
  }

  static DecodeRequest Request(std::vector<uint64_t> ids, const std::string& dataset = "data") {
    DecodeRequest request;
    request.dataset = dataset;
    request.fingerprint = kFingerprint;
    request.seed = 7;
    request.epoch = 2;
    request.ids = std::move(ids);
    return request;
  }

  Result<DecodedRows> Decode(DecodeRequest request, std::vector<uint8_t> buffer = {}) {
    Answer answer;
    lender->Decode(std::move(request), answer.Done(), std::move(buffer));
    Result<DecodedRows> result = answer.Wait();
    CHECK(answer.Calls() == 1);
    return result;
  }

  // Expects a refusal of `request`, answered before Decode returns; returns it.
  Status Refusal(DecodeRequest request) {
    Answer answer;
    lender->Decode(std::move(request), answer.Done());
    REQUIRE(answer.Calls() == 1);
    REQUIRE_FALSE(answer.result.ok());
    return answer.result.status();
  }

  std::unique_ptr<Env> env = NewPosixEnv();
  std::shared_ptr<RowSource> source = std::make_shared<RowSource>(/*parallel=*/true, /*bad=*/3);
  std::unique_ptr<Catalog> catalog;
  DecodePool pool{3};
  std::unique_ptr<DecodeLender> lender;
};

TEST_CASE("lent rows are the bytes a local decode writes, tensor-major") {
  Harness h("lender_bytes");
  for (const std::vector<uint64_t>& ids :
       {std::vector<uint64_t>{5}, std::vector<uint64_t>{5, 0, 63, 5, 9, 10, 11, 12, 40}}) {
    Result<DecodedRows> rows = h.Decode(Harness::Request(ids));
    INFO(rows.status().ToString());
    REQUIRE(rows.ok());
    CHECK(rows->failed.empty());
    CHECK(rows->bytes.size() == ids.size() * 13);
    CHECK(rows->bytes == DecodeLocally(*h.source, ids, SampleContext{7, 2}));
  }
  // Sequential sources too; fingerprint 0 is not checked.
  Harness serial("lender_serial");
  serial.source = std::make_shared<RowSource>(/*parallel=*/false);
  DecodeRequest request = Harness::Request({1, 2, 3});
  request.fingerprint = 0;
  Result<DecodedRows> rows = serial.Decode(request);
  REQUIRE(rows.ok());
  CHECK(rows->bytes == DecodeLocally(*serial.source, {1, 2, 3}, SampleContext{7, 2}));

  // Into an earlier answer's memory, larger or smaller: its bytes are written over.
  for (size_t stale : {size_t{1000}, size_t{20}}) {
    Result<DecodedRows> again =
        h.Decode(Harness::Request({7, 8, 9}), std::vector<uint8_t>(stale, 0xab));
    REQUIRE(again.ok());
    CHECK(again->bytes == DecodeLocally(*h.source, {7, 8, 9}, SampleContext{7, 2}));
  }

  const DecodeLender::Stats stats = h.lender->stats();
  CHECK(stats.requests == 4);
  CHECK(stats.rows == 16);
  CHECK(stats.bytes == 208);
  CHECK(stats.failed_rows == 0);
  CHECK(stats.refused == 0);
  CHECK(stats.in_flight == 0);
}

TEST_CASE("a sample that fails is listed with why, its rows zeros") {
  Harness h("lender_failed");
  const std::vector<uint64_t> ids = {2, 3, 4};
  Result<DecodedRows> rows = h.Decode(Harness::Request(ids));
  REQUIRE(rows.ok());
  REQUIRE(rows->failed.size() == 1);
  CHECK(rows->failed[0].first == 1);
  CHECK(rows->failed[0].second.code() == StatusCode::kDataLoss);
  CHECK(rows->failed[0].second.message() ==
        "dataset 'data' sample 3: /data/rows.bin: corrupt at byte 42");
  // The others as decoded here; the failed one's rows zeros.
  std::vector<uint8_t> expected(ids.size() * 13, 0);
  const std::vector<uint8_t> two = DecodeLocally(*h.source, {2}, {7, 2});
  const std::vector<uint8_t> four = DecodeLocally(*h.source, {4}, {7, 2});
  std::memcpy(&expected[0], &two[0], 12);
  std::memcpy(&expected[24], &four[0], 12);
  expected[36] = two[12];
  expected[38] = four[12];
  CHECK(rows->bytes == expected);
  CHECK(h.lender->stats().failed_rows == 1);
  CHECK(h.lender->stats().rows == 3);
}

TEST_CASE("each refusal names what is wrong, answered at once") {
  DecodeLenderLimits limits;
  limits.max_bytes = 13 * 4;
  Harness h("lender_refusals", limits);

  Status s = h.Refusal(Harness::Request({}));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "ids: none (a decode request of dataset 'data' asks for 1..1024 samples)");

  s = h.Refusal(Harness::Request(std::vector<uint64_t>(kMaxDecodeIds + 1, 0)));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "ids: 1025 samples of dataset 'data', at most 1024 in one decode request");

  s = h.Refusal(Harness::Request({1}, "../etc"));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::StartsWith("dataset: dataset name '../etc'"));

  // Unknown, and another user's: the same answer.
  s = h.Refusal(Harness::Request({1}, "nope"));
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK(s.message() == "dataset 'nope' not found");
  DecodeRequest other = Harness::Request({1}, "private");
  other.caller.uid = 1001;
  s = h.Refusal(other);
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK(s.message() == "dataset 'private' not found");
  DecodeRequest unknown = Harness::Request({1}, "private");  // a caller the node did not know
  s = h.Refusal(unknown);
  CHECK(s.code() == StatusCode::kNotFound);
  // Its owner reads it.
  DecodeRequest owner = Harness::Request({1}, "private");
  owner.caller.uid = 1000;
  CHECK(h.Decode(owner).ok());

  DecodeRequest changed = Harness::Request({1});
  changed.fingerprint = 0x99;
  s = h.Refusal(changed);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(s.message() ==
        "fingerprint: dataset 'data' has 00c0ffee12345678 here, the calling node's copy has "
        "0000000000000099 (the nodes' copies differ)");

  s = h.Refusal(Harness::Request({1, 64}));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "ids[1]: 64 is not below the 64 samples of dataset 'data'");

  s = h.Refusal(Harness::Request({1, 2, 3, 4, 5}));
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK(s.message() ==
        "rows: 5 samples of dataset 'data' are 65 bytes, more than the 52 one decode request "
        "may take (ask for fewer)");
  CHECK(h.Decode(Harness::Request({1, 2, 4, 5})).ok());  // exactly max_bytes

  const DecodeLender::Stats stats = h.lender->stats();
  CHECK(stats.refused == 9);
  CHECK(stats.requests == 2);
}

// A loader whose loads finish when the test says.
struct PendingLoads {
  DecodeLender::SourceLoader Loader() {
    return [this](const DatasetInfo&) {
      std::lock_guard<std::mutex> lock(mu);
      ++loads;
      return future;
    };
  }
  std::mutex mu;
  int loads = 0;
  std::promise<Result<std::shared_ptr<const Source>>> promise;
  DatasetCache::SourceFuture future = promise.get_future().share();
};

TEST_CASE("more than max_in_flight requests at once are refused: busy") {
  DecodeLenderLimits limits;
  limits.max_in_flight = 2;
  PendingLoads loads;
  Harness h("lender_busy", limits, loads.Loader());
  Answer first, second, third;
  h.lender->Decode(Harness::Request({1}), first.Done());
  h.lender->Decode(Harness::Request({2, 3}), second.Done());
  // Both wait for the load, off the caller's thread.
  CHECK(first.Calls() == 0);
  CHECK(second.Calls() == 0);
  CHECK(h.lender->stats().in_flight == 2);
  h.lender->Decode(Harness::Request({4}), third.Done());
  REQUIRE(third.Calls() == 1);
  CHECK(third.result.status().code() == StatusCode::kResourceExhausted);
  CHECK(third.result.status().message() ==
        "busy: 2 decode requests for other nodes in flight here, at most 2");

  loads.promise.set_value(std::shared_ptr<const Source>(h.source));
  REQUIRE(first.Wait().ok());
  Result<DecodedRows> rows = second.Wait();
  REQUIRE(rows.ok());
  CHECK(rows->failed.size() == 1);  // sample 3
  CHECK(first.Calls() == 1);
  CHECK(second.Calls() == 1);
  CHECK(h.lender->stats().in_flight == 0);
  // Room again.
  CHECK(h.Decode(Harness::Request({4})).ok());
  CHECK(h.lender->stats().refused == 1);
}

TEST_CASE("a load that fails or takes too long fails the request") {
  SECTION("failed") {
    Harness h("lender_load_failed", {}, [](const DatasetInfo&) {
      std::promise<Result<std::shared_ptr<const Source>>> p;
      p.set_value(Status(DataLoss("/data/rows/index: truncated")));
      return p.get_future().share();
    });
    Result<DecodedRows> rows = h.Decode(Harness::Request({1}));
    CHECK(rows.status().code() == StatusCode::kDataLoss);
    CHECK(rows.status().message() == "dataset 'data': /data/rows/index: truncated");
    CHECK(h.lender->stats().failed == 1);
  }
  SECTION("too long") {
    DecodeLenderLimits limits;
    limits.load_timeout = milliseconds(50);
    PendingLoads loads;
    Harness h("lender_load_slow", limits, loads.Loader());
    const auto start = std::chrono::steady_clock::now();
    Result<DecodedRows> rows = h.Decode(Harness::Request({1}));
    CHECK(std::chrono::steady_clock::now() - start >= milliseconds(50));
    CHECK(rows.status().code() == StatusCode::kDeadlineExceeded);
    CHECK(rows.status().message() == "dataset 'data' did not load within 50 ms here");
    CHECK(h.lender->stats().in_flight == 0);
  }
}

TEST_CASE("destroying the lender answers the requests still waiting for a load") {
  PendingLoads loads;
  Harness h("lender_destroy", {}, loads.Loader());
  Answer answer;
  h.lender->Decode(Harness::Request({1}), answer.Done());
  CHECK(answer.Calls() == 0);
  h.lender.reset();
  REQUIRE(answer.Calls() == 1);
  CHECK(answer.result.status().code() == StatusCode::kCancelled);
}

TEST_CASE("every request is answered exactly once, from any number of callers") {
  DecodeLenderLimits limits;
  limits.max_in_flight = 1000;
  Harness h("lender_once", limits);
  constexpr int kCallers = 4, kEach = 50;
  std::vector<std::unique_ptr<Answer>> answers;
  for (int i = 0; i < kCallers * kEach; ++i) answers.push_back(std::make_unique<Answer>());
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int i = 0; i < kEach; ++i) {
        const uint64_t id = static_cast<uint64_t>(c * kEach + i) % kCount;
        h.lender->Decode(Harness::Request({id, (id + 1) % kCount, (id + 2) % kCount}),
                         answers[c * kEach + i]->Done());
      }
    });
  for (std::thread& t : callers) t.join();
  for (auto& answer : answers) {
    Result<DecodedRows> rows = answer->Wait();
    REQUIRE(rows.ok());
    CHECK(rows->bytes.size() == 3 * 13);
  }
  std::this_thread::sleep_for(milliseconds(20));  // a second call would come by now
  for (auto& answer : answers) CHECK(answer->Calls() == 1);
  const DecodeLender::Stats stats = h.lender->stats();
  CHECK(stats.requests == kCallers * kEach);
  CHECK(stats.rows == 3 * kCallers * kEach);
  CHECK(stats.in_flight == 0);
}

TEST_CASE("a dataset loaded for lending stays loaded until idle for hold_idle") {
  DecodeLenderLimits limits;
  limits.hold_idle = milliseconds(100);
  std::weak_ptr<const Source> loaded;
  std::mutex mu;
  Harness h("lender_hold", limits, [&](const DatasetInfo&) {
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<const Source> source = loaded.lock();
    if (!source) source = std::make_shared<RowSource>(/*parallel=*/true);
    loaded = source;  // what DatasetCache does: holds it weakly
    return Ready(source);
  });
  REQUIRE(h.Decode(Harness::Request({1})).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    CHECK_FALSE(loaded.expired());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (loaded.expired()) break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  std::lock_guard<std::mutex> lock(mu);
  CHECK(loaded.expired());
}

}  // namespace
}  // namespace ember::daemon
