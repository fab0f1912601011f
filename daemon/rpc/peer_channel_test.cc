// A RemoteCoordinator over a PeerChannel to a coordinator that never answers: what the
// event loop's callers (StreamManager::Close, on the loop) must not wait for.
#include "daemon/rpc/peer_channel.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <kj/async-io.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/catalog/catalog.h"
#include "daemon/coordinator/remote_coordinator.h"
#include "daemon/stream/stream_manager.h"
#include "daemon/stream/stream_testing.h"

namespace ember::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A TCP port that takes connections (the kernel's backlog) and never reads from them: a
// coordinator that hangs.
class SilentPeer {
 public:
  SilentPeer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t length = sizeof(addr);
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) == 0);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  ~SilentPeer() { close(fd_); }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
};

// Aborts the test binary with `what` unless Done() is called within `limit`: for a call
// that would deadlock the thread that has to notice it.
class Deadline {
 public:
  Deadline(std::chrono::seconds limit, std::string what)
      : thread_([this, limit, what = std::move(what)] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [&] { return done_; })) {
            std::fprintf(stderr, "FAILED: %s (still blocked after %lld s)\n", what.c_str(),
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Deadline() {
    Done();
    thread_.join();
  }
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

TEST_CASE("closing a stream whose remote coordinator does not answer returns at once") {
  auto io = kj::setupAsyncIo();
  kj::Timer& timer = io.provider->getTimer();
  SilentPeer peer;
  RemoteCoordinatorOptions options;
  options.node = "test-node";
  options.call_timeout = 30 * kj::SECONDS;
  PeerChannel channel(*io.provider, /*tls=*/nullptr, peer.address(), options.node);
  RemoteCoordinator remote(timer, channel, peer.address(), options);

  std::unique_ptr<Env> env = NewPosixEnv();
  auto source = std::make_shared<FakeSource>(64, /*parallel=*/false);
  auto probe = [info = source->info()](const DatasetSpec& spec, const DatasetOwner&,
                                       IndexingProgress*) {
    DatasetInfo probed = info;
    probed.spec = spec;
    return Result<DatasetInfo>(probed);
  };
  auto catalog = Catalog::Open(env.get(), FreshTestDir("remote_close"), probe);
  REQUIRE(catalog.ok());
  REQUIRE((*catalog)->Add(DatasetSpec{"fake", "idx", "/data/fake", "train"}).ok());
  JobLedger ledger;
  DecodePool pool(1);
  StreamManager streams(
      env.get(), catalog->get(), &ledger, [source](const DatasetInfo&) { return Ready(source); },
      &pool, StreamLimits{});
  streams.set_coordinator_resolver(
      [&remote](const std::string&) -> Result<JobCoordinator*> { return &remote; });

  StreamParams params;
  params.job = "j";
  params.dataset = "fake";
  params.batch_size = 8;
  params.world_size = 2;
  params.slots = 2;
  params.coordinator = peer.address();
  auto stream = streams.Open(params);
  REQUIRE(stream.ok());
  const uint64_t id = (*stream)->id();
  stream->reset();

  // The producer's Next is out in an exchange that will not be answered.
  const auto asked_by = Clock::now() + std::chrono::seconds(10);
  while (remote.traffic().exchanges == 0 && Clock::now() < asked_by)
    timer.afterDelay(5 * kj::MILLISECONDS).wait(io.waitScope);
  REQUIRE(remote.traffic().exchanges == 1);
  timer.afterDelay(50 * kj::MILLISECONDS).wait(io.waitScope);

  // On the event loop's thread, as DaemonServer closes a stream.
  const auto start = Clock::now();
  {
    Deadline deadline(std::chrono::seconds(10), "StreamManager::Close on the event loop");
    streams.Close(id);
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  INFO("Close took " << took.count() << " ms");
  CHECK(took < milliseconds(100));
  CHECK(streams.Stats().empty());

  // The loop stays free for the rank's other work meanwhile: status answers.
  CHECK(remote.Summaries().empty());

  // Shutting the proxy down fails the producer's wait, so that it ends and the manager's
  // reaper frees the ring.
  remote.Shutdown();
  const auto freed_by = Clock::now() + std::chrono::seconds(10);
  while (streams.shm_bytes_in_use() != 0 && Clock::now() < freed_by)
    timer.afterDelay(10 * kj::MILLISECONDS).wait(io.waitScope);
  CHECK(streams.shm_bytes_in_use() == 0);
}

}  // namespace
}  // namespace ember::daemon
