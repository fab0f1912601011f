// A node's RemoteCoordinator over a LocalPeerChannel to a PeerService and its JobLedger:
// the node side of coordination (linger batching, rejoin with held batches, refusals,
// deadlines) against the coordinator's real policy, with the network's faults, and no
// sockets.
#include "daemon/service/local_peer_channel.h"

#include <kj/async-io.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "daemon/coordinator/job_ledger.h"
#include "daemon/coordinator/remote_coordinator.h"

namespace ember::daemon {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kSamples = 48;
constexpr uint32_t kBatch = 4;
constexpr uint32_t kRanks = 2;

JobParams Params(uint64_t seed = 7) {
  JobParams p;
  p.dataset = "tokens";
  p.num_samples = kSamples;
  p.batch_size = kBatch;
  p.world_size = kRanks;
  p.seed = seed;
  return p;
}

// The coordinating daemon (a JobLedger behind a PeerService) and one node's daemon (a
// RemoteCoordinator over a LocalPeerChannel, node "node-b"), on an event loop thread of
// their own; the test's threads are the node's streams, calling Next and Commit.
class TwoNodes {
 public:
  explicit TwoNodes(RemoteCoordinatorOptions options = Options()) {
    std::promise<void> ready;
    loop_ = std::thread([&] {
      kj::AsyncIoContext io = kj::setupAsyncIo();
      PeerService service({"node-a", &ledger_, nullptr});
      LocalPeerChannel channel(service);
      RemoteCoordinator remote(io.provider->getTimer(), channel, "node-a:7000", options);
      auto stop = kj::newPromiseAndCrossThreadFulfiller<void>();
      executor_ = &kj::getCurrentThreadExecutor();
      channel_ = &channel;
      remote_ = &remote;
      stop_ = kj::mv(stop.fulfiller);
      ready.set_value();
      stop.promise.wait(io.waitScope);
      remote.Shutdown();
    });
    ready.get_future().wait();
  }
  ~TwoNodes() {
    stop_->fulfill();
    loop_.join();
  }

  static RemoteCoordinatorOptions Options() {
    RemoteCoordinatorOptions options;
    options.node = "node-b";
    options.call_timeout = 5 * kj::SECONDS;
    options.reconnect_timeout = milliseconds(5000);
    return options;
  }

  JobLedger& ledger() { return ledger_; }
  RemoteCoordinator& remote() { return *remote_; }
  // Runs `f` on the loop's thread (the channel's faults, Summaries, traffic).
  void OnLoop(const std::function<void(LocalPeerChannel&, RemoteCoordinator&)>& f) {
    executor_->executeSync([&] { f(*channel_, *remote_); });
  }

 private:
  JobLedger ledger_;
  std::thread loop_;
  const kj::Executor* executor_ = nullptr;
  LocalPeerChannel* channel_ = nullptr;
  RemoteCoordinator* remote_ = nullptr;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop_;
};

// What the node's ranks consumed, by epoch: sample ids, each as many times as served.
class Consumed {
 public:
  void Add(uint64_t epoch, const std::vector<uint64_t>& ids) {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t id : ids) ++counts_[epoch][id];
  }
  // Every sample of `epoch` exactly once.
  void CheckExactlyOnce(uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::map<uint64_t, int>& counts = counts_[epoch];
    CHECK(counts.size() == kSamples);
    for (const auto& [id, n] : counts) {
      INFO("epoch " << epoch << " sample " << id);
      CHECK(n == 1);
    }
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, std::map<uint64_t, int>> counts_;
};

// One rank's epoch, as its stream reads it: Next until the epoch's last step, committing
// each. `before(step)` runs before each Next (to inject a fault). Runs on the ranks'
// threads, so no Catch2 assertions (they are not thread-safe): the first error, named.
Status ReadEpoch(RemoteCoordinator& remote, uint32_t rank, uint64_t epoch, Consumed& consumed,
                 const std::function<void(uint64_t)>& before = {}) {
  for (uint64_t step = 0;; ++step) {
    if (before) before(step);
    const std::string where = "rank " + std::to_string(rank) + " epoch " +
                              std::to_string(epoch) + " step " + std::to_string(step);
    Result<BatchLease> lease = remote.Next("job", rank, epoch);
    if (!lease.ok()) return lease.status().WithContext(where);
    if (lease->epoch != epoch)
      return Internal(where + ": leased from epoch " + std::to_string(lease->epoch));
    consumed.Add(epoch, lease->sample_ids);
    EMBER_RETURN_IF_ERROR(remote.Commit("job", rank, epoch, lease->batch));
    if (lease->last_in_epoch) return Status::Ok();
  }
}

void JoinAll(RemoteCoordinator& remote, const JobParams& params = Params()) {
  for (uint32_t rank = 0; rank < kRanks; ++rank)
    REQUIRE(remote.Join("job", rank, params).ok());
}

// Both ranks read `epoch` on threads of their own; rank 0 runs `before` (see ReadEpoch).
void ReadEpochBothRanks(RemoteCoordinator& remote, uint64_t epoch, Consumed& consumed,
                        const std::function<void(uint64_t)>& before = {}) {
  Status rank1;
  std::thread other([&] { rank1 = ReadEpoch(remote, 1, epoch, consumed); });
  const Status rank0 = ReadEpoch(remote, 0, epoch, consumed, before);
  other.join();
  INFO(rank0.ToString() << " / " << rank1.ToString());
  REQUIRE(rank0.ok());
  REQUIRE(rank1.ok());
}

// The coordinator's ledger once the node's last commits (sent without waiting) are in.
JobSummary SettledAtCoordinator(JobLedger& ledger) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    std::vector<JobSummary> jobs = ledger.Summaries();
    REQUIRE(jobs.size() == 1);
    if (jobs[0].leases_in_flight == 0 || std::chrono::steady_clock::now() > deadline)
      return jobs[0];
    std::this_thread::sleep_for(milliseconds(5));
  }
}

TEST_CASE("a node's ranks lease every sample once through the remote coordinator") {
  TwoNodes nodes;
  JoinAll(nodes.remote());
  Consumed consumed;
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    ReadEpochBothRanks(nodes.remote(), epoch, consumed);
    consumed.CheckExactlyOnce(epoch);
  }
  nodes.OnLoop([](LocalPeerChannel& channel, RemoteCoordinator& remote) {
    RemoteCoordinator::Traffic traffic = remote.traffic();
    CHECK(traffic.channel.connections == 1);
    CHECK(traffic.joins == kRanks);
    CHECK(traffic.leases == 2 * kSamples / kBatch);
    CHECK(channel.exchanges() == traffic.exchanges);
    std::vector<JobSummary> summaries = remote.Summaries();
    REQUIRE(summaries.size() == 1);
    CHECK(summaries[0].coordinator == "node-a:7000");
    CHECK(summaries[0].ranks.size() == kRanks);
    CHECK(summaries[0].ranks[0].node == "node-b");
  });
  // The coordinator's ledger agrees: the ranks joined from node-b, and nothing is leased.
  JobSummary at_coordinator = SettledAtCoordinator(nodes.ledger());
  CHECK(at_coordinator.leases_in_flight == 0);
  REQUIRE(at_coordinator.ranks.size() == kRanks);
  CHECK(at_coordinator.ranks[1].node == "node-b");
}

TEST_CASE("after a dropped connection the ranks join again and continue where they stood") {
  TwoNodes nodes;
  JoinAll(nodes.remote());
  Consumed consumed;
  ReadEpochBothRanks(nodes.remote(), 0, consumed, [&](uint64_t step) {
    if (step == 2)
      nodes.OnLoop([](LocalPeerChannel& channel, RemoteCoordinator&) { channel.Drop(); });
  });
  ReadEpochBothRanks(nodes.remote(), 1, consumed);
  consumed.CheckExactlyOnce(0);
  consumed.CheckExactlyOnce(1);
  nodes.OnLoop([](LocalPeerChannel&, RemoteCoordinator& remote) {
    CHECK(remote.traffic().channel.connections == 2);
    CHECK(remote.traffic().joins == 2 * kRanks);  // each rank joined again, once
  });
}

TEST_CASE("an exchange whose answer is lost after the coordinator applied it: no sample "
          "twice, none lost") {
  TwoNodes nodes;
  JoinAll(nodes.remote());
  Consumed consumed;
  // The coordinator applies rank 0's commit of the step before and leases its next step;
  // the node hears nothing of it. The rank joins again, reporting what it consumed; the
  // lease it never got is the coordinator's to serve again.
  ReadEpochBothRanks(nodes.remote(), 0, consumed, [&](uint64_t step) {
    if (step == 3)
      nodes.OnLoop([](LocalPeerChannel& channel, RemoteCoordinator&) {
        channel.LoseNextAnswer();
      });
  });
  consumed.CheckExactlyOnce(0);
  ReadEpochBothRanks(nodes.remote(), 1, consumed);
  consumed.CheckExactlyOnce(1);
  CHECK(SettledAtCoordinator(nodes.ledger()).leases_in_flight == 0);
}

TEST_CASE("a refused join answers the rank's Next with the refusal, naming the node") {
  TwoNodes nodes;
  // Rank 0 created the job with seed 7, from the coordinator's own node.
  REQUIRE(nodes.ledger().Join("job", 0, Params(7)).ok());
  // Node b's rank 1 asks with another seed.
  REQUIRE(nodes.remote().Join("job", 1, Params(8)).ok());
  const auto start = std::chrono::steady_clock::now();
  Result<BatchLease> lease = nodes.remote().Next("job", 1, 0);
  REQUIRE_FALSE(lease.ok());
  CHECK(lease.status().code() != StatusCode::kUnavailable);  // not retried as unreachable
  CHECK(lease.status().message().find("node 'node-b'") != std::string::npos);
  CHECK(lease.status().message().find("seed") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("an unreachable coordinator: Next retries, and gives up at reconnect_timeout") {
  RemoteCoordinatorOptions options = TwoNodes::Options();
  options.reconnect_timeout = milliseconds(600);
  TwoNodes nodes(options);
  nodes.OnLoop([](LocalPeerChannel& channel, RemoteCoordinator&) {
    channel.set_unreachable(true);
  });
  JoinAll(nodes.remote());

  SECTION("it stays unreachable") {
    Result<BatchLease> lease = nodes.remote().Next("job", 0, 0);
    REQUIRE(lease.status().code() == StatusCode::kUnavailable);
    CHECK(lease.status().message().find("coordinator node-a:7000") != std::string::npos);
    CHECK(lease.status().message().find("unreachable") != std::string::npos);
    CHECK(lease.status().message().find("gave up after") != std::string::npos);
  }
  SECTION("it comes back within the deadline") {
    std::thread back([&] {
      std::this_thread::sleep_for(milliseconds(150));
      nodes.OnLoop([](LocalPeerChannel& channel, RemoteCoordinator&) {
        channel.set_unreachable(false);
      });
    });
    Consumed consumed;
    ReadEpochBothRanks(nodes.remote(), 0, consumed);
    back.join();
    consumed.CheckExactlyOnce(0);
  }
}

TEST_CASE("a coordinator that does not answer: Next fails at call_timeout; Shutdown at once") {
  RemoteCoordinatorOptions options = TwoNodes::Options();
  options.call_timeout = 200 * kj::MILLISECONDS;
  TwoNodes nodes(options);
  nodes.OnLoop([](LocalPeerChannel& channel, RemoteCoordinator&) { channel.set_silent(true); });
  JoinAll(nodes.remote());
  const auto start = std::chrono::steady_clock::now();
  Result<BatchLease> lease = nodes.remote().Next("job", 0, 0);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(lease.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(lease.status().message().find("no answer in time") != std::string::npos);
  CHECK(took >= milliseconds(200));
  CHECK(took < std::chrono::seconds(3));

  // A Next waiting when the daemon shuts down fails then, not at its deadline.
  std::atomic<bool> done{false};
  Result<BatchLease> waiting = Internal("not answered");
  std::thread rank([&] {
    waiting = nodes.remote().Next("job", 1, 0);
    done = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  nodes.OnLoop([](LocalPeerChannel&, RemoteCoordinator& remote) { remote.Shutdown(); });
  rank.join();
  CHECK(waiting.status().code() == StatusCode::kUnavailable);
  CHECK(waiting.status().message().find("shutting down") != std::string::npos);
}

}  // namespace
}  // namespace ember::daemon
