// RemoteDecoders over fake channels: how batches are split, what a call brings back, a
// failing or slow worker left out until its retry, and shutdown cancelling calls in
// progress.
#include "daemon/decode/remote_decoders.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "common/mutex.h"

namespace ember::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// Answers each id with a row of one byte (id % 251); `fail` makes it refuse; `stall` makes
// it wait, writing nothing, until its deadline or Cancel().
class FakeChannel : public DecodeChannel {
 public:
  Result<RemoteAnswer> Decode(const DecodeRequest& request, const RowsDestination& into,
                              Clock::time_point deadline) override {
    ++calls;
    if (fail) return Unavailable("worker down");
    if (stall) {
      MutexLock lock(&mu_);
      while (!cancelled_ && Clock::now() < deadline)
        (void)changed_.WaitFor(&mu_, std::chrono::milliseconds(5));
      if (cancelled_) return Cancelled("cancelled");
      return DeadlineExceeded("no answer in time");
    }
    for (size_t i = 0; i < request.ids.size(); ++i)
      into.tensors[0][i] = static_cast<uint8_t>(request.ids[i] % 251);
    RemoteAnswer answer;
    answer.bytes = request.ids.size();
    return answer;
  }
  void Cancel() override {
    MutexLock lock(&mu_);
    cancelled_ = true;
    changed_.SignalAll();
  }
  std::atomic<bool> fail{false}, stall{false};
  std::atomic<int> calls{0};

 private:
  Mutex mu_;
  CondVar changed_;
  bool cancelled_ GUARDED_BY(mu_) = false;
};

struct Harness {
  Harness() {
    RemoteDecodersOptions options;
    options.retry_after = std::chrono::milliseconds(100);
    options.call_timeout = std::chrono::milliseconds(200);
    decoders = std::make_unique<RemoteDecoders>(
        std::vector<RemoteDecoders::Worker>{{"w1:7000", &one}, {"w2:7000", &two}}, options);
  }
  // Sends ids to `worker` and waits for the answer; the rows land in `rows` (a byte each).
  Result<RemoteAnswer> Call(size_t worker, std::vector<uint64_t> ids) {
    std::atomic<bool> done{false};
    Result<RemoteAnswer> answer = Internal("unset");
    DecodeRequest request;
    request.dataset = "d";
    request.ids = std::move(ids);
    rows.assign(request.ids.size(), 0);
    decoders->Send(worker, request, RowsDestination{{rows.data()}, {1}},
                   [&](Result<RemoteAnswer> got) {
                     answer = std::move(got);
                     done = true;
                   });
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!done && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(done);
    return answer;
  }
  FakeChannel one, two;
  std::vector<uint8_t> rows;
  std::unique_ptr<RemoteDecoders> decoders;
};

TEST_CASE("a batch is split between this node and the workers that are up") {
  Harness h;
  // No rate known yet: equal parts, from the end; this node keeps the first.
  auto parts = h.decoders->Split(30, 0);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].worker == 0);
  CHECK(parts[0].begin == 20);
  CHECK(parts[0].end == 30);
  CHECK(parts[1].worker == 1);
  CHECK(parts[1].begin == 10);
  CHECK(parts[1].end == 20);
  CHECK(h.decoders->Split(1, 0).empty());  // a single row stays here
  for (const auto& p : h.decoders->Split(3, 0)) CHECK(p.begin >= 1);
}

TEST_CASE("a call brings the worker's rows; a failed one leaves the worker out until its retry") {
  Harness h;
  auto answer = h.Call(0, {1, 2, 300});
  REQUIRE(answer.ok());
  CHECK(answer->bytes == 3);
  CHECK(h.rows == std::vector<uint8_t>{1, 2, 300 % 251});
  h.two.fail = true;
  auto failed = h.Call(1, {5});
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(failed.status().message(), Catch::Contains("worker down"));
  // Left out now: only worker 0 gets a part.
  auto parts = h.decoders->Split(30, 0);
  REQUIRE(parts.size() == 1);
  CHECK(parts[0].worker == 0);
  auto stats = h.decoders->Stats();
  CHECK(stats[0].rows == 3);
  CHECK(stats[0].up);
  CHECK_FALSE(stats[1].up);
  CHECK(stats[1].failed_calls == 1);
  // After retry_after it is tried again, and answers.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  CHECK(h.decoders->Split(30, 0).size() == 2);
  h.two.fail = false;
  CHECK(h.Call(1, {7}).ok());
  CHECK(h.decoders->Stats()[1].up);
  h.decoders->CountLocal(6);
  CHECK(h.decoders->Stats()[0].share == Approx(3.0 / 10));
}

TEST_CASE("a call gets the call timeout as its deadline; past it the worker is left out") {
  Harness h;
  h.one.stall = true;
  const auto began = Clock::now();
  auto answer = h.Call(0, {7, 8});
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(Clock::now() - began >= std::chrono::milliseconds(190));
  CHECK(h.rows == std::vector<uint8_t>{0, 0});
  CHECK_FALSE(h.decoders->Stats()[0].up);
}

TEST_CASE("shutdown cancels calls in progress and those queued, losing none") {
  Harness h;
  h.one.stall = true;
  std::atomic<int> cancelled{0};
  uint8_t row = 0;
  DecodeRequest request;
  request.ids = {1};
  h.decoders->Send(0, request, RowsDestination{{&row}, {1}}, [&](Result<RemoteAnswer> r) {
    if (r.status().code() == StatusCode::kCancelled) ++cancelled;
  });
  while (h.one.calls == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  h.decoders->Shutdown();
  h.decoders.reset();  // joins: the call in progress has answered
  CHECK(cancelled == 1);
  Harness again;
  again.decoders->Shutdown();
  again.decoders->Send(0, request, RowsDestination{{&row}, {1}}, [&](Result<RemoteAnswer> r) {
    if (r.status().code() == StatusCode::kCancelled) ++cancelled;
  });
  CHECK(cancelled == 2);
}

}  // namespace
}  // namespace ember::daemon
