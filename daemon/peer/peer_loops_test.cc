#include "daemon/peer/peer_loops.h"

#include <catch2/catch.hpp>
#include <kj/async-io.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/peer/loop_links.h"
#include "schemas/peer.capnp.h"

namespace ember::daemon {
namespace {

// Runs `io`'s loop (the caller's) until `done()` or 5 s; whether `done()` came true.
bool RunUntil(kj::AsyncIoContext& io, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    io.provider->getTimer().afterDelay(2 * kj::MILLISECONDS).wait(io.waitScope);
  }
  return true;
}

// Records, thread-safely, the threads something ran on.
struct Threads {
  void Add() {
    std::lock_guard<std::mutex> lock(mu);
    ids.push_back(std::this_thread::get_id());
  }
  std::vector<std::thread::id> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return ids;
  }
  std::mutex mu;
  std::vector<std::thread::id> ids;
};

// Destroyed on some thread: records which.
struct Guard {
  explicit Guard(Threads* t) : threads(t) {}
  ~Guard() { threads->Add(); }
  Threads* threads;
};

// A Peer on the home loop: hello answers "home" and records the thread it ran on; its
// destruction is counted.
class HomePeer final : public rpc::Peer::Server {
 public:
  HomePeer(Threads* served, std::atomic<int>* destroyed)
      : served_(served), destroyed_(destroyed) {}
  ~HomePeer() { ++*destroyed_; }

 protected:
  kj::Promise<void> hello(HelloContext context) override {
    served_->Add();
    context.getResults().setNode("home");
    return kj::READY_NOW;
  }

 private:
  Threads* served_;
  std::atomic<int>* destroyed_;
};

TEST_CASE("Run runs on the loops' own threads, in turn") {
  auto io = kj::setupAsyncIo();
  PeerLoops loops(2);
  REQUIRE(loops.size() == 2);
  Threads ran;
  for (int i = 0; i < 4; ++i) loops.Run([&ran](PeerLoops::Loop&) { ran.Add(); }).wait(io.waitScope);
  const std::vector<std::thread::id> ids = ran.Get();
  REQUIRE(ids.size() == 4);
  CHECK(ids[0] != std::this_thread::get_id());
  CHECK(ids[1] != std::this_thread::get_id());
  CHECK(ids[0] != ids[1]);
  CHECK(ids[2] == ids[0]);
  CHECK(ids[3] == ids[1]);
}

TEST_CASE("what a loop's tasks hold is destroyed on that loop's thread, by Clear or the end") {
  auto io = kj::setupAsyncIo();
  Threads ran, destroyed;
  {
    PeerLoops loops(1);
    auto hold = [&](PeerLoops::Loop& loop) {
      ran.Add();
      loop.tasks->add(kj::Promise<void>(kj::NEVER_DONE).attach(kj::heap<Guard>(&destroyed)));
    };
    loops.Run(hold).wait(io.waitScope);
    CHECK(destroyed.Get().empty());
    loops.Clear().wait(io.waitScope);
    REQUIRE(destroyed.Get().size() == 1);
    CHECK(destroyed.Get()[0] == ran.Get()[0]);

    loops.Run(hold).wait(io.waitScope);  // the loop goes on after Clear
    CHECK(destroyed.Get().size() == 1);
  }  // stopping the loops
  REQUIRE(destroyed.Get().size() == 2);
  CHECK(destroyed.Get()[1] == ran.Get()[0]);
}

TEST_CASE("a link from a peer loop reaches a capability served on the home loop") {
  auto io = kj::setupAsyncIo();
  LoopLinks links(io);
  Threads served;
  std::atomic<int> destroyed{0};
  std::mutex mu;
  std::string answer;
  {
    PeerLoops loops(1);
    // Lives on the peer loop: the link, and the answer of a hello through it.
    std::unique_ptr<LoopLinks::Link> link;
    loops
        .Run([&](PeerLoops::Loop& loop) {
          link = links.Connect(loop.io, [&served, &destroyed] {
            return capnp::Capability::Client(kj::heap<HomePeer>(&served, &destroyed));
          });
          auto hello = link->capability().castAs<rpc::Peer>().helloRequest();
          hello.setNode("peer loop");
          loop.tasks->add(hello.send().then([&](capnp::Response<rpc::Peer::HelloResults>&& r) {
            std::lock_guard<std::mutex> lock(mu);
            answer = r.getNode();
          }));
        })
        .wait(io.waitScope);
    // The home end is served by this (the test's) loop: it must run for the answer.
    REQUIRE(RunUntil(io, [&] {
      std::lock_guard<std::mutex> lock(mu);
      return !answer.empty();
    }));
    CHECK(answer == "home");
    REQUIRE(served.Get().size() == 1);
    CHECK(served.Get()[0] == std::this_thread::get_id());
    CHECK(destroyed == 0);

    // Dropping the link on its loop ends the home end and what it served.
    loops.Run([&](PeerLoops::Loop&) { link.reset(); }).wait(io.waitScope);
    CHECK(RunUntil(io, [&] { return destroyed == 1; }));
    loops.Clear().wait(io.waitScope);
  }
}

TEST_CASE("a link whose peer loop goes away leaves nothing at home") {
  auto io = kj::setupAsyncIo();
  LoopLinks links(io);
  Threads served;
  std::atomic<int> destroyed{0};
  {
    PeerLoops loops(1);
    loops
        .Run([&](PeerLoops::Loop& loop) {
          auto link = links.Connect(loop.io, [&served, &destroyed] {
            return capnp::Capability::Client(kj::heap<HomePeer>(&served, &destroyed));
          });
          // Kept by the loop's tasks until Clear.
          loop.tasks->add(kj::Promise<void>(kj::NEVER_DONE).attach(kj::mv(link)));
        })
        .wait(io.waitScope);
    REQUIRE(RunUntil(io, [&] { return links.size() == 1; }));
    loops.Clear().wait(io.waitScope);
  }
  CHECK(RunUntil(io, [&] { return destroyed == 1 && links.size() == 0; }));
  CHECK(served.Get().empty());
}

}  // namespace
}  // namespace ember::daemon
