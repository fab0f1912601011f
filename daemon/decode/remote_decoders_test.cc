// RemoteDecoders over fake channels on a real kj event loop: how batches are split, what a
// call brings back, and a failing worker left out until its retry.
#include "daemon/decode/remote_decoders.h"

#include <kj/async-io.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace ember::daemon {
namespace {

// Answers each id with one byte (id % 251); `fail` makes it refuse.
class FakeChannel : public DecodeChannel {
 public:
  kj::Promise<Result<RemoteRows>> Decode(const DecodeRequest& request) override {
    ++calls;
    if (fail) return Result<RemoteRows>(Unavailable("worker down"));
    auto bytes = std::make_shared<std::vector<uint8_t>>();
    for (uint64_t id : request.ids) bytes->push_back(static_cast<uint8_t>(id % 251));
    RemoteRows rows;
    rows.data = bytes->data();
    rows.size = bytes->size();
    rows.hold = bytes;
    return Result<RemoteRows>(std::move(rows));
  }
  std::atomic<bool> fail{false};
  std::atomic<int> calls{0};
};

struct Harness {
  Harness() {
    RemoteDecodersOptions options;
    options.retry_after = std::chrono::milliseconds(100);
    decoders = std::make_unique<RemoteDecoders>(
        io.provider->getTimer(),
        std::vector<RemoteDecoders::Worker>{{"w1:7000", &one}, {"w2:7000", &two}}, options);
  }
  ~Harness() {
    decoders->Shutdown();
    // Its caller threads may still hand an answer's memory back to the loop: run it.
    std::atomic<bool> gone{false};
    std::thread destroy([&] {
      decoders.reset();
      gone = true;
    });
    while (!gone) {
      io.waitScope.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    destroy.join();
  }
  // Sends ids to `worker` and runs the loop until the answer comes.
  Result<RemoteRows> Call(size_t worker, std::vector<uint64_t> ids) {
    std::atomic<bool> done{false};
    Result<RemoteRows> answer = Internal("unset");
    DecodeRequest request;
    request.dataset = "d";
    request.ids = std::move(ids);
    decoders->Send(worker, request, [&](Result<RemoteRows> rows) {
      answer = std::move(rows);
      done = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done && std::chrono::steady_clock::now() < deadline) {
      io.waitScope.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(done);
    return answer;
  }
  kj::AsyncIoContext io = kj::setupAsyncIo();
  FakeChannel one, two;
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
  auto rows = h.Call(0, {1, 2, 300});
  REQUIRE(rows.ok());
  REQUIRE(rows->size == 3);
  CHECK(rows->data[2] == 300 % 251);
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

TEST_CASE("calls queued at shutdown are cancelled, not lost") {
  Harness h;
  std::atomic<int> cancelled{0};
  h.decoders->Shutdown();
  DecodeRequest request;
  request.ids = {1};
  h.decoders->Send(0, request, [&](Result<RemoteRows> r) {
    if (r.status().code() == StatusCode::kCancelled) ++cancelled;
  });
  CHECK(cancelled == 1);
}

}  // namespace
}  // namespace ember::daemon
