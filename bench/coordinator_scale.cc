// coordinator_scale: one coordinating emberd serving many simulated node daemons (issue
// 12, "Coordinator scale, simulated"). It starts a real emberd with `listen:
// 127.0.0.1:0` and `tls: off` (or is pointed at one with --coordinator), then simulates
// --nodes node daemons on loopback from --threads kj event loops: one peer connection per
// node, hello, and a Peer.joinJob per rank (--ranks-per-node), as
// daemon/coordinator/remote_coordinator.cc does. After one untimed step, at --steps-per-second every rank of every node, on its
// node's tick (all nodes at once, or spread over --spread of the step's interval),
// commits the batch it holds and asks for its next one: one Peer.exchange per node per
// step carrying its ranks' commits and lease requests, as the proxy does (protocol 2;
// with --per-rank, one Coordination.commit and one Coordination.next RPC per rank, sent
// together without waiting, as the protocol-1 proxy did). A node whose exchange (a rank
// whose next) has not come back by its tick skips that tick (a late tick per rank), so
// a coordinator that falls behind shows
// as fewer steps per second. After --warmup seconds it measures for --seconds:
//
//   steps_per_second           leases received in the window / ranks / seconds
//   coordinator_cpu_ms_per_step  emberd's utime + stime (/proc/PID/stat) in the window /
//                              steps (and / ranks: coordinator_cpu_us_per_rank_step);
//                              coordinator_cores: the same / seconds, the busiest emberd
//                              thread's share (busiest_thread_cores), and what the target
//                              rate would take at this cost (coordinator_cores_at_target)
//   lease_p50_ms, lease_p99_ms, lease_max_ms  next's latency, from send to answer in this
//                              process (so it includes this process's own queueing),
//                              of the nexts sent in the window
//   journal_bytes_per_step     growth of <state_dir>/jobs.journal (sampled every 100 ms;
//                              a compaction shrinks the file: journal_compactions counts
//                              them, and the growth is summed between them) / steps
//   rpcs_per_step, client_tx_bytes_per_step, client_rx_bytes_per_step  RPCs sent and this
//                              process's socket bytes (/proc/self/io wchar, rchar) / steps
//   client_cores               this process's CPU (getrusage) / seconds: it shares the
//                              machine with the coordinator
// It prints one JSON line (also appended to --json FILE). Exit 1 on an RPC error, naming
// the node and rank.
//
//   coordinator_scale [--nodes 64] [--ranks-per-node 8] [--steps-per-second 10]
//                     [--seconds 10] [--warmup 2] [--batch 32] [--steps-per-epoch 0]
//                     [--samples 0] [--spread 0] [--threads 1] [--peer-threads 0]
//                     [--per-rank] [--emberd PATH]
//                     [--coordinator HOST:PORT --coordinator-pid PID --journal PATH]
//                     [--keep] [--json FILE]
// --samples 0: enough for one epoch to last the whole run (no epoch boundary in the
// window); --steps-per-epoch S instead: S global steps per epoch (a lease names positions
// of the epoch's order: the coordinator builds no order; a node would, ahead of time).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <capnp/capability.h>
#include <kj/async-io.h>
#include <kj/debug.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/json_lines.h"
#include "bench/stats.h"
#include "common/env.h"
#include "common/rpc_status.h"
#include "bench/peer_wire_client.h"
#include "bench/proc_stats.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/peer_wire.h"
#include "daemon/peer/read_buffer.h"
#include "daemon/rpc/peer_protocol.h"
#include "daemon/rpc/peer_client.h"
#include "schemas/peer.capnp.h"

extern char** environ;

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  uint32_t nodes = 64;
  uint32_t ranks_per_node = 8;
  double steps_per_second = 10;
  double seconds = 10;
  double warmup = 2;
  uint32_t batch = 32;
  uint64_t steps_per_epoch = 0;
  uint64_t samples = 0;
  double spread = 0;
  uint32_t threads = 1;
  uint32_t peer_threads = 0;
  bool per_rank = false;
  bool rpc_client = false;
  std::string emberd;
  std::string coordinator;
  int coordinator_pid = 0;
  std::string journal;
  bool keep = false;
  std::string json;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Clock::duration FromSeconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The job's dataset name: the coordinator's ledger never looks it up in its catalog (a
// node's daemon checks its own copy), so none is registered.
constexpr char kDataset[] = "coordinator-scale";

std::string NodeName(uint32_t node) { return "sim-" + std::to_string(node); }

// Peer's methods by ordinal (schemas/peer.capnp), for the light client.
constexpr uint16_t kHelloMethod = 0;
constexpr uint16_t kJoinJobMethod = 1;
constexpr uint16_t kExchangeMethod = 3;

// The job every simulated rank joins, and the schedule (fixed before the threads start,
// except `start` and the window, which the main thread sets once every node has joined).
struct Schedule {
  std::string address;
  std::string job;
  // The job's params (peer.capnp JobParams): dataset kDataset, seed 1, shuffled, no
  // resume, fingerprint 0 (not checked).
  uint64_t num_samples = 0;
  uint32_t batch_size = 0;
  uint32_t world_size = 0;
  uint32_t ranks_per_node = 8;
  bool per_rank = false;     // one commit and one next RPC per rank, not an exchange per node
  bool light = false;        // nodes speak through PeerWireClient, not an RpcSystem
  double interval_s = 0.1;   // 1 / steps per second
  double spread = 0;         // node i's tick is offset by spread x interval x i / nodes
  uint32_t nodes = 0;
  uint64_t timed_steps = 0;  // ticks after the untimed first step
  Clock::time_point start;
  Clock::time_point window_begin;
  Clock::time_point window_end;
};

// Where the simulating threads and the main thread meet: at the start, each thread reports
// Ready once its nodes joined and took their first lease (or failed), and the main thread
// Opens the gate once it set the schedule's start; at the end, a second gate opens once
// the main thread read the window's figures, and only then do the ranks leave.
class Gate {
 public:
  explicit Gate(uint32_t threads) : waiting_for_(threads) {}
  void Ready() {
    std::lock_guard<std::mutex> lock(mu_);
    --waiting_for_;
    cv_.notify_all();
  }
  // False if not every thread was ready within `timeout`.
  bool WaitAllReady(Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return waiting_for_ == 0; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // False if the gate did not open within `timeout`.
  bool WaitOpen(Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint32_t waiting_for_;
  bool open_ = false;
};

// What one thread measured.
struct ThreadStats {
  std::vector<double> lease_ms;  // nexts sent in the window
  uint64_t leases_in_window = 0;  // answers received in the window
  uint64_t rpcs_in_window = 0;    // nexts and commits sent in the window
  uint64_t late_ticks = 0;        // rank ticks skipped: its next still outstanding
  double connect_s = 0;           // connect, hello and joinJob of all its nodes
  double first_lease_s = 0;       // the untimed first step
  std::string error;              // empty: no RPC failed
};

// One event loop thread simulating nodes [first, first + count). Run() is the thread;
// the stats may be read once it returned.
class SimThread final : public kj::TaskSet::ErrorHandler {
 public:
  // `measured` opens once the main thread has read the window's figures.
  SimThread(const Schedule& schedule, Gate& gate, Gate& measured, uint32_t first,
            uint32_t count)
      : schedule_(schedule), gate_(gate), measured_(measured), first_(first), count_(count) {}

  void Run() {
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { RunOnLoop(); })) {
      if (stats_.error.empty()) stats_.error = rpc_status::FromException(*e).ToString();
    }
    if (!ready_reported_) gate_.Ready();
  }
  const ThreadStats& stats() const { return stats_; }

  void taskFailed(kj::Exception&& e) override {
    if (stats_.error.empty()) stats_.error = rpc_status::FromException(e).ToString();
  }

 private:
  struct Rank {
    rpc::Coordination::Client coordination = nullptr;
    uint64_t epoch = 0;       // of its next lease
    bool pending = false;     // a next is outstanding
    bool holds = false;       // holds a lease not yet committed
    uint64_t held_epoch = 0;
    uint64_t held_batch = 0;
  };
  struct Node {
    uint32_t index = 0;
    std::unique_ptr<daemon::PeerConnection> connection;  // the RPC client's
    std::unique_ptr<PeerWireClient> wire;                // the light client's
    std::vector<Rank> ranks;
    bool pending = false;  // an exchange is outstanding
    // The last exchange's answer, released once the next exchange is sent, as the proxy
    // does (its Finish message then goes with the next call).
    kj::Maybe<capnp::Response<rpc::Peer::ExchangeResults>> answered;
  };

  void RunOnLoop() {
    auto io = kj::setupAsyncIo();
    io_ = &io;
    kj::TaskSet tasks(*this);
    tasks_ = &tasks;
    std::vector<Node> nodes(count_);
    for (uint32_t i = 0; i < count_; ++i) {
      nodes[i].index = first_ + i;
      nodes[i].ranks.resize(schedule_.ranks_per_node);
    }
    KJ_DEFER({
      tasks_ = nullptr;
      nodes.clear();  // closes the connections on this loop: the ranks leave the job
      io_ = nullptr;
    });

    // Connect in groups, so the listener's accept backlog never overflows.
    const Clock::time_point connecting = Clock::now();
    constexpr uint32_t kConnectGroup = 64;
    for (uint32_t begin = 0; begin < count_ && stats_.error.empty(); begin += kConnectGroup) {
      kj::Vector<kj::Promise<void>> group;
      for (uint32_t i = begin; i < std::min(count_, begin + kConnectGroup); ++i)
        group.add(Join(nodes[i]));
      kj::joinPromises(group.releaseAsArray()).wait(io.waitScope);
    }
    stats_.connect_s = Seconds(Clock::now() - connecting);

    // The untimed first step.
    const Clock::time_point first = Clock::now();
    for (Node& node : nodes) Tick(node, /*counted=*/false);
    DrainOrFail(io, std::chrono::seconds(120), "the first step");
    stats_.first_lease_s = Seconds(Clock::now() - first);
    stats_.late_ticks = 0;

    gate_.Ready();
    ready_reported_ = true;
    if (!gate_.WaitOpen(std::chrono::minutes(10)))
      KJ_FAIL_REQUIRE("the main thread never started the run");
    timed_ = true;
    if (!stats_.error.empty()) return;
    kj::Vector<kj::Promise<void>> loops;
    for (Node& node : nodes) loops.add(NodeLoop(node, 1));
    kj::joinPromises(loops.releaseAsArray()).wait(io.waitScope);
    DrainOrFail(io, std::chrono::seconds(60), "the last step");
    // The ranks leave only once the main thread has read the window's figures.
    if (!measured_.WaitOpen(std::chrono::minutes(10)))
      KJ_FAIL_REQUIRE("the main thread never finished measuring");
  }

  // Connects node `node`, says hello and joins its ranks: through the light wire client,
  // or (per-rank protocol, --rpc-client) a real RpcSystem, pipelined as the proxy does.
  kj::Promise<void> Join(Node& node) {
    if (schedule_.light) return JoinLight(node);
    const std::string name = NodeName(node.index);
    return daemon::ConnectToPeer(*io_->provider, /*tls=*/nullptr, schedule_.address)
        .then([this, &node, name](Result<std::unique_ptr<daemon::PeerConnection>> connection) {
          if (!connection.ok())
            kj::throwFatalException(
                rpc_status::ToException(connection.status().WithContext("node '" + name + "'")));
          node.connection = std::move(connection).value();
          rpc::Peer::Client peer = node.connection->Bootstrap<rpc::Peer>();
          return daemon::SayHello(peer, name).then(
              [this, &node, name, peer](Result<daemon::PeerHello> hello) mutable {
                if (!hello.ok())
                  kj::throwFatalException(
                      rpc_status::ToException(hello.status().WithContext("node '" + name + "'")));
                kj::Vector<kj::Promise<void>> joins;
                for (uint32_t r = 0; r < node.ranks.size(); ++r) {
                  auto request = peer.joinJobRequest();
                  FillJoin(node, r, request);
                  auto response = request.send();
                  node.ranks[r].coordination = response.getCoordination();
                  joins.add(response.ignoreResult());
                }
                return kj::joinPromises(joins.releaseAsArray());
              });
        });
  }

  // Join through PeerWireClient: TCP, the accepted byte, bootstrap, hello, a joinJob per
  // rank (one after another).
  kj::Promise<void> JoinLight(Node& node) {
    const std::string name = NodeName(node.index);
    return io_->provider->getNetwork()
        .parseAddress(kj::StringPtr(schedule_.address.c_str()))
        .then([](kj::Own<kj::NetworkAddress> address) {
          return address->connect().attach(kj::mv(address));
        })
        .then([this, &node](kj::Own<kj::AsyncIoStream> stream) {
          auto accepted = kj::heap<uint8_t>(0);
          auto read = stream->tryRead(accepted.get(), 1, 1);
          return read.then([this, &node, stream = kj::mv(stream),
                            accepted = kj::mv(accepted)](size_t n) mutable {
            KJ_REQUIRE(n == 1 && *accepted == daemon::kPeerAcceptedByte,
                       "the coordinator did not accept this node");
            node.wire = std::make_unique<PeerWireClient>(daemon::BufferReads(kj::mv(stream)));
            return node.wire->Bootstrap();
          });
        })
        .then([&node, name] {
          return node.wire->Call(kHelloMethod, [name](capnp::AnyPointer::Builder params) {
            auto hello = params.initAs<rpc::Peer::HelloParams>();
            hello.setNode(name);
            hello.setProtocol(daemon::kPeerProtocol);
          });
        })
        .then([this, &node](PeerWireClient::Answer&&) { return JoinRanks(node, 0); })
        .catch_([name](kj::Exception&& e) -> kj::Promise<void> {
          return kj::Exception(e.getType(), __FILE__, __LINE__,
                               kj::str("node '", name.c_str(), "': ", e.getDescription()));
        });
  }

  kj::Promise<void> JoinRanks(Node& node, uint32_t r) {
    if (r == node.ranks.size()) return kj::READY_NOW;
    return node.wire
        ->Call(kJoinJobMethod,
               [this, &node, r](capnp::AnyPointer::Builder params) {
                 FillJoin(node, r, params.initAs<rpc::Peer::JoinJobParams>());
               })
        .then([this, &node, r](PeerWireClient::Answer&&) { return JoinRanks(node, r + 1); });
  }

  // Rank r of `node` joins the schedule's job.
  void FillJoin(const Node& node, uint32_t r, rpc::Peer::JoinJobParams::Builder request) {
    request.setJob(schedule_.job);
    request.setRank(node.index * schedule_.ranks_per_node + r);
    auto params = request.initParams();
    params.setDataset(kDataset);
    params.setNumSamples(schedule_.num_samples);
    params.setBatchSize(schedule_.batch_size);
    params.setWorldSize(schedule_.world_size);
    params.setSeed(1);
    params.setShuffle(true);
    request.setNode(NodeName(node.index));
  }

  // Tick `step` (1-based) of `node` and the ticks after it.
  kj::Promise<void> NodeLoop(Node& node, uint64_t step) {
    if (step > schedule_.timed_steps || !stats_.error.empty()) return kj::READY_NOW;
    const double offset = schedule_.spread * schedule_.interval_s * node.index / schedule_.nodes;
    const Clock::time_point due =
        schedule_.start + FromSeconds(static_cast<double>(step - 1) * schedule_.interval_s + offset);
    const auto delay = std::max<Clock::duration>(due - Clock::now(), Clock::duration::zero());
    return io_->provider->getTimer()
        .afterDelay(std::chrono::duration_cast<std::chrono::nanoseconds>(delay).count() *
                    kj::NANOSECONDS)
        .then([this, &node, step] {
          Tick(node, InWindow(Clock::now()));
          return NodeLoop(node, step + 1);
        });
  }

  // The schedule's window is set once the gate opens: before, nothing is in it.
  bool InWindow(Clock::time_point t) const {
    return timed_ && t >= schedule_.window_begin && t < schedule_.window_end;
  }

  // Every rank of `node` commits what it holds and asks for its next batch; `counted`:
  // the RPCs are the window's.
  void Tick(Node& node, bool counted) {
    if (schedule_.per_rank)
      TickPerRank(node, counted);
    else
      TickNode(node, counted);
  }

  // The node's daemon speaks for its ranks in one Peer.exchange, as
  // daemon/coordinator/remote_coordinator.cc does; a node whose exchange is outstanding skips
  // the tick (each of its ranks a late tick).
  void TickNode(Node& node, bool counted) {
    if (node.pending) {
      stats_.late_ticks += node.ranks.size();
      return;
    }
    auto fill = [this, &node](rpc::Peer::ExchangeParams::Builder request) {
      request.setJob(schedule_.job);
      const uint32_t base = node.index * schedule_.ranks_per_node;
      uint32_t holding = 0;
      for (const Rank& rank : node.ranks) holding += rank.holds ? 1 : 0;
      auto commits = request.initCommits(holding);
      auto wants = request.initWants(node.ranks.size());
      uint32_t c = 0;
      for (uint32_t r = 0; r < node.ranks.size(); ++r) {
        Rank& rank = node.ranks[r];
        if (rank.holds) {
          commits[c].setRank(base + r);
          commits[c].setEpoch(rank.held_epoch);
          commits[c].setBatch(rank.held_batch);
          ++c;
          rank.holds = false;
        }
        wants[r].setRank(base + r);
        wants[r].setEpoch(rank.epoch);
      }
    };
    node.pending = true;
    ++outstanding_;
    if (counted) ++stats_.rpcs_in_window;
    const Clock::time_point sent = Clock::now();
    auto failed = [this, &node](kj::Exception&& e) {
      node.pending = false;
      Failed(node, 0, "exchange", e);
    };
    if (schedule_.light) {
      auto reply = node.wire->Call(kExchangeMethod, [&fill](capnp::AnyPointer::Builder params) {
        fill(params.initAs<rpc::Peer::ExchangeParams>());
      });
      tasks_->add(reply.then(
          [this, &node, sent, counted](PeerWireClient::Answer&& answer) {
            Exchanged(node, sent, counted, answer.content.getAs<rpc::Peer::ExchangeResults>());
          },
          kj::mv(failed)));
      return;
    }
    auto request = node.connection->Bootstrap<rpc::Peer>().exchangeRequest();
    fill(request);
    auto reply = request.send();
    node.answered = nullptr;
    tasks_->add(reply.then(
        [this, &node, sent, counted](capnp::Response<rpc::Peer::ExchangeResults>&& response) {
          Exchanged(node, sent, counted, response);
          node.answered = kj::mv(response);
        },
        kj::mv(failed)));
  }

  // The answer to `node`'s exchange sent at `sent`.
  void Exchanged(Node& node, Clock::time_point sent, bool counted,
                 rpc::Peer::ExchangeResults::Reader response) {
    const Clock::time_point answered = Clock::now();
    node.pending = false;
    --outstanding_;
    if (response.getCommitErrors().size() > 0 && stats_.error.empty())
      stats_.error = "node '" + NodeName(node.index) +
                     "' commit: " + std::string(response.getCommitErrors()[0]);
    auto results = response.getResults();
    for (uint32_t r = 0; r < node.ranks.size() && r < results.size(); ++r) {
      if (!results[r].isLease()) {
        if (stats_.error.empty())
          stats_.error = "node '" + NodeName(node.index) + "' rank " +
                         std::to_string(results[r].getRank()) +
                         " next: " + std::string(results[r].getError());
        continue;
      }
      Hold(node.ranks[r], results[r].getLease());
      if (counted)
        stats_.lease_ms.push_back(
            std::chrono::duration<double, std::milli>(answered - sent).count());
      if (InWindow(answered)) ++stats_.leases_in_window;
    }
  }

  void Hold(Rank& rank, rpc::BatchLease::Reader lease) {
    rank.holds = true;
    rank.held_epoch = lease.getEpoch();
    rank.held_batch = lease.getBatch();
    if (lease.getLastInEpoch()) rank.epoch = lease.getEpoch() + 1;
  }

  // One Coordination.commit and one Coordination.next per rank (the protocol-1 proxy).
  void TickPerRank(Node& node, bool counted) {
    for (uint32_t r = 0; r < node.ranks.size(); ++r) {
      Rank& rank = node.ranks[r];
      if (rank.pending) {
        ++stats_.late_ticks;
        continue;
      }
      if (rank.holds) {
        auto commit = rank.coordination.commitRequest();
        commit.setEpoch(rank.held_epoch);
        commit.setBatch(rank.held_batch);
        ++outstanding_;
        tasks_->add(commit.send().then(
            [this](capnp::Response<rpc::Coordination::CommitResults>&&) { --outstanding_; },
            [this, &node, r](kj::Exception&& e) { Failed(node, r, "commit", e); }));
        rank.holds = false;
        if (counted) ++stats_.rpcs_in_window;
      }
      auto next = rank.coordination.nextRequest();
      next.setEpoch(rank.epoch);
      rank.pending = true;
      ++outstanding_;
      if (counted) ++stats_.rpcs_in_window;
      const Clock::time_point sent = Clock::now();
      tasks_->add(next.send().then(
          [this, &rank, sent, counted](capnp::Response<rpc::Coordination::NextResults>&& response) {
            const Clock::time_point answered = Clock::now();
            Hold(rank, response.getLease());
            rank.pending = false;
            --outstanding_;
            if (counted)
              stats_.lease_ms.push_back(std::chrono::duration<double, std::milli>(answered - sent).count());
            if (InWindow(answered)) ++stats_.leases_in_window;
          },
          [this, &node, r](kj::Exception&& e) { Failed(node, r, "next", e); }));
    }
  }

  void Failed(const Node& node, uint32_t r, const char* call, const kj::Exception& e) {
    --outstanding_;
    if (!stats_.error.empty()) return;
    stats_.error = rpc_status::FromException(e)
                       .WithContext("node '" + NodeName(node.index) + "' rank " +
                                    std::to_string(node.index * schedule_.ranks_per_node + r) +
                                    " " + call)
                       .ToString();
  }

  // Runs the loop until no RPC is outstanding; fails after `timeout`.
  void DrainOrFail(kj::AsyncIoContext& io, Clock::duration timeout, const char* what) {
    const Clock::time_point deadline = Clock::now() + timeout;
    while (outstanding_ > 0 && stats_.error.empty()) {
      if (Clock::now() > deadline)
        KJ_FAIL_REQUIRE("RPCs still outstanding after the timeout", what, outstanding_);
      io.provider->getTimer().afterDelay(5 * kj::MILLISECONDS).wait(io.waitScope);
    }
  }

  const Schedule& schedule_;
  Gate& gate_;
  Gate& measured_;
  const uint32_t first_;
  const uint32_t count_;
  kj::AsyncIoContext* io_ = nullptr;
  kj::TaskSet* tasks_ = nullptr;
  uint64_t outstanding_ = 0;
  bool ready_reported_ = false;
  bool timed_ = false;  // the gate opened: the schedule's start and window are set
  ThreadStats stats_;
};

// CPU seconds (utime + stime) of a process and of each of its threads, by thread id.
struct CpuSample {
  double total = 0;
  std::map<int, std::pair<std::string, double>> threads;  // tid -> (name, seconds)
};

CpuSample ReadCpu(Env& env, int pid) {
  CpuSample sample;
  if (pid <= 0) return sample;
  const std::string proc = "/proc/" + std::to_string(pid);
  if (auto stat = ReadProcStat(env, proc + "/stat"); stat.ok()) sample.total = stat->cpu_seconds;
  auto tids = env.ListDir(proc + "/task");
  if (!tids.ok()) return sample;
  for (const std::string& tid : *tids) {
    if (auto stat = ReadProcStat(env, proc + "/task/" + tid + "/stat"); stat.ok())
      sample.threads[std::stoi(tid)] = {stat->name, stat->cpu_seconds};
  }
  return sample;
}

// This process's bytes read and written through read/write calls (/proc/self/io).
struct IoSample {
  uint64_t rchar = 0;
  uint64_t wchar = 0;
};

IoSample ReadSelfIo() {
  IoSample io;
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "rchar:") io.rchar = value;
    if (key == "wchar:") io.wchar = value;
  }
  return io;
}

double SelfCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// The private emberd: started in `dir`, stopped (SIGTERM, then SIGKILL after 20 s) and
// its directory removed on destruction unless `keep`.
class Coordinator {
 public:
  Coordinator(Env& env, std::string emberd, uint32_t peer_threads, bool keep)
      : env_(env), emberd_(std::move(emberd)), peer_threads_(peer_threads), keep_(keep) {}
  ~Coordinator() {
    Stop();
    if (!dir_.empty() && !keep_) (void)env_.RemoveAll(dir_);
  }

  // Starts it and waits (20 s at most) for <state_dir>/peer.port.
  Status Start() {
    char pattern[] = "/tmp/ember-scale.XXXXXX";
    if (mkdtemp(pattern) == nullptr) return Unavailable("mkdtemp /tmp/ember-scale.XXXXXX failed");
    dir_ = pattern;
    const std::string config = dir_ + "/emberd.yaml";
    EMBER_RETURN_IF_ERROR(env_.WriteFileAtomic(
        config, "listen: 127.0.0.1:0\ntls: off\nnode: coordinator\npeer_threads: " +
                    std::to_string(peer_threads_) + "\n"));
    const std::vector<std::string> argv = {emberd_,
                                           "--config", config,
                                           "--socket", dir_ + "/emberd.sock",
                                           "--state-dir", dir_ + "/state",
                                           "--decode-threads", "1",
                                           "--log-level", "warn"};
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<char*> env;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::string(*e).rfind("NOTIFY_SOCKET=", 0) != 0) env.push_back(*e);
    env.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = log_path();
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int rc = posix_spawn(&pid_, emberd_.c_str(), &actions, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = 0;
      return Unavailable("cannot start " + emberd_ + ": " + std::strerror(rc) +
                         " (build it: bazel build //daemon:emberd, or pass --emberd)");
    }
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return Unavailable("emberd exited during start-up; " + log + ":\n" + LogText());
      }
      Result<std::string> port = env_.ReadFile(dir_ + "/state/peer.port");
      if (port.ok() && !port->empty()) {
        address_ = "127.0.0.1:" + std::to_string(std::stoi(*port));
        return Status::Ok();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return DeadlineExceeded("emberd wrote no " + dir_ + "/state/peer.port within 20 s; " + log +
                            ":\n" + LogText());
  }

  // SIGTERM, waits 20 s, then SIGKILL. The exit status: 0 for a clean exit; -1 if it was
  // killed or none was running.
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(20);
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        pid_ = 0;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  int pid() const { return pid_; }
  const std::string& address() const { return address_; }
  std::string journal() const { return dir_ + "/state/jobs.journal"; }
  std::string log_path() const { return dir_ + "/emberd.log"; }
  std::string LogText() const {
    Result<std::string> text = env_.ReadFile(log_path());
    return text.ok() ? *text : "";
  }

 private:
  Env& env_;
  const std::string emberd_;
  const uint32_t peer_threads_;
  const bool keep_;
  std::string dir_;
  std::string address_;
  pid_t pid_ = 0;
};

int Fail(const std::string& message) {
  std::cerr << "coordinator_scale: " << message << "\n";
  return 1;
}

int Run(const Flags& flags) {
  std::unique_ptr<Env> env = NewPosixEnv();
  Coordinator coordinator(*env, flags.emberd, flags.peer_threads, flags.keep);
  Schedule schedule;
  int pid = flags.coordinator_pid;
  std::string journal = flags.journal;
  if (flags.coordinator.empty()) {
    Status started = coordinator.Start();
    if (!started.ok()) return Fail(started.message());
    schedule.address = coordinator.address();
    pid = coordinator.pid();
    journal = coordinator.journal();
  } else {
    schedule.address = flags.coordinator;
  }

  const uint32_t world = flags.nodes * flags.ranks_per_node;
  const uint64_t global_batch = uint64_t{flags.batch} * world;
  schedule.interval_s = 1.0 / flags.steps_per_second;
  schedule.spread = flags.spread;
  schedule.nodes = flags.nodes;
  schedule.ranks_per_node = flags.ranks_per_node;
  schedule.per_rank = flags.per_rank;
  schedule.light = !flags.per_rank && !flags.rpc_client;
  // Ticks go on half a second past the window, so that its end is still steady state.
  schedule.timed_steps = static_cast<uint64_t>(
      std::ceil((flags.warmup + flags.seconds + 0.5) * flags.steps_per_second));
  schedule.job = "scale-" + std::to_string(getpid());
  schedule.num_samples = flags.samples != 0 ? flags.samples
                       : flags.steps_per_epoch != 0
                           ? flags.steps_per_epoch * global_batch
                           : (schedule.timed_steps + 2 + schedule.timed_steps / 10) * global_batch;
  schedule.batch_size = flags.batch;
  schedule.world_size = world;

  const double load_before = LoadAverage1(*env);

  Gate gate(flags.threads), measured(flags.threads);
  std::vector<std::unique_ptr<SimThread>> sims;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < flags.threads; ++t) {
    const uint32_t first = flags.nodes * t / flags.threads;
    const uint32_t end = flags.nodes * (t + 1) / flags.threads;
    sims.push_back(std::make_unique<SimThread>(schedule, gate, measured, first, end - first));
  }
  // The threads read the schedule's start and window only once the gate opens.
  for (auto& sim : sims) threads.emplace_back([&sim] { sim->Run(); });
  const bool ready_in_time = gate.WaitAllReady(std::chrono::minutes(5));
  schedule.start = Clock::now() + std::chrono::milliseconds(50);
  schedule.window_begin = schedule.start + FromSeconds(flags.warmup);
  schedule.window_end = schedule.window_begin + FromSeconds(flags.seconds);
  gate.Open();
  const auto join_all = [&] {
    measured.Open();
    for (std::thread& t : threads) t.join();
  };
  if (!ready_in_time) {
    join_all();
    return Fail("the simulated nodes did not join within 5 minutes");
  }

  std::this_thread::sleep_until(schedule.window_begin);
  const uint64_t coordinator_fds = [&]() -> uint64_t {
    auto fds = env->ListDir("/proc/" + std::to_string(pid) + "/fd");
    return pid > 0 && fds.ok() ? fds->size() : 0;
  }();
  const CpuSample cpu_begin = ReadCpu(*env, pid);
  const IoSample io_begin = ReadSelfIo();
  const double self_cpu_begin = SelfCpuSeconds();
  int64_t journal_last = FileSize(journal);
  uint64_t journal_growth = 0, compactions = 0;
  for (;;) {
    const Clock::time_point next = std::min(Clock::now() + std::chrono::milliseconds(100),
                                            schedule.window_end);
    std::this_thread::sleep_until(next);
    const int64_t size = FileSize(journal);
    if (size >= 0 && journal_last >= 0) {
      if (size >= journal_last) journal_growth += static_cast<uint64_t>(size - journal_last);
      else ++compactions;
    }
    journal_last = size;
    if (next >= schedule.window_end) break;
  }
  const CpuSample cpu_end = ReadCpu(*env, pid);
  const IoSample io_end = ReadSelfIo();
  const double self_cpu_end = SelfCpuSeconds();
  const uint64_t rss_kib = pid > 0 ? std::max(ProcKib(*env, pid, "status", "VmHWM"), 0L) : 0;
  const uint64_t coordinator_threads = pid > 0 ? cpu_end.threads.size() : 0;
  // The threads serving peer connections (emberd names them emberd-peer-N).
  uint64_t peer_loops = 0;
  for (const auto& thread : cpu_end.threads)
    if (thread.second.first.rfind("emberd-peer", 0) == 0) ++peer_loops;
  join_all();

  std::vector<double> lease_ms;
  uint64_t leases = 0, rpcs = 0, late = 0;
  double connect_s = 0, first_lease_s = 0;
  for (const auto& sim : sims) {
    const ThreadStats& s = sim->stats();
    if (!s.error.empty()) return Fail(s.error);
    lease_ms.insert(lease_ms.end(), s.lease_ms.begin(), s.lease_ms.end());
    leases += s.leases_in_window;
    rpcs += s.rpcs_in_window;
    late += s.late_ticks;
    connect_s = std::max(connect_s, s.connect_s);
    first_lease_s = std::max(first_lease_s, s.first_lease_s);
  }
  const int exit_status = flags.coordinator.empty() ? coordinator.Stop() : 0;
  if (exit_status != 0)
    return Fail("emberd did not exit cleanly after SIGTERM (status " +
                std::to_string(exit_status) + "); " + coordinator.log_path() + ":\n" +
                coordinator.LogText());

  const double steps = static_cast<double>(leases) / world;
  const double per_step = steps > 0 ? 1.0 / steps : 0;
  const double cpu_s = cpu_end.total - cpu_begin.total;
  std::string busiest = "-";
  double busiest_s = 0;
  for (const auto& [tid, thread] : cpu_end.threads) {
    auto before = cpu_begin.threads.find(tid);
    const double s = thread.second - (before == cpu_begin.threads.end() ? 0 : before->second.second);
    if (s > busiest_s) {
      busiest_s = s;
      busiest = thread.first;
    }
  }
  const std::string fields = StringPrintf(
      "\"nodes\": %u, \"ranks_per_node\": %u, \"ranks\": %u, \"batch\": %u, "
      "\"num_samples\": %llu, \"steps_per_epoch\": %llu, \"target_steps_per_second\": %g, "
      "\"seconds\": %g, \"warmup\": %g, \"spread\": %g, \"threads\": %u, \"peer_threads\": %u, \"tls\": false, "
      "\"protocol\": \"%s\", \"client\": \"%s\", "
      "\"loadavg_1min_before\": %.2f, "
      "\"steps_per_second\": %.2f, \"late_rank_ticks\": %llu, "
      "\"coordinator_cpu_ms_per_step\": %.2f, \"coordinator_cpu_us_per_rank_step\": %.1f, "
      "\"coordinator_cores\": %.3f, \"coordinator_cores_at_target\": %.3f, "
      "\"busiest_thread\": \"%s\", \"busiest_thread_cores\": %.3f, "
      "\"lease_p50_ms\": %.3f, \"lease_p99_ms\": %.3f, \"lease_max_ms\": %.3f, "
      "\"journal_bytes_per_step\": %.0f, \"journal_compactions\": %llu, "
      "\"rpcs_per_step\": %.0f, \"client_tx_bytes_per_step\": %.0f, "
      "\"client_rx_bytes_per_step\": %.0f, \"client_cores\": %.3f, "
      "\"connect_s\": %.2f, \"first_step_s\": %.3f, \"coordinator_peak_rss_mib\": %.1f, "
      "\"coordinator_threads\": %llu, \"coordinator_peer_loops\": %llu, "
      "\"coordinator_fds\": %llu",
      flags.nodes, flags.ranks_per_node, world, flags.batch,
      static_cast<unsigned long long>(schedule.num_samples),
      static_cast<unsigned long long>((schedule.num_samples + global_batch - 1) / global_batch),
      flags.steps_per_second, flags.seconds, flags.warmup, flags.spread, flags.threads,
      flags.peer_threads, flags.per_rank ? "per-rank" : "per-node", schedule.light ? "light" : "rpc", load_before, steps / flags.seconds, static_cast<unsigned long long>(late),
      1000 * cpu_s * per_step, 1e6 * cpu_s * per_step / world, cpu_s / flags.seconds,
      cpu_s * per_step * flags.steps_per_second, busiest.c_str(), busiest_s / flags.seconds,
      Quantile(lease_ms, 0.5), Quantile(lease_ms, 0.99), Quantile(lease_ms, 1.0),
      static_cast<double>(journal_growth) * per_step, static_cast<unsigned long long>(compactions),
      static_cast<double>(rpcs) * per_step,
      static_cast<double>(io_end.wchar - io_begin.wchar) * per_step,
      static_cast<double>(io_end.rchar - io_begin.rchar) * per_step,
      (self_cpu_end - self_cpu_begin) / flags.seconds, connect_s, first_lease_s,
      static_cast<double>(rss_kib) / 1024, static_cast<unsigned long long>(coordinator_threads),
      static_cast<unsigned long long>(peer_loops), static_cast<unsigned long long>(coordinator_fds));
  std::printf("{\"tool\": \"coordinator_scale\", %s}\n", fields.c_str());
  JsonLines(flags.json, "coordinator_scale").Append(fields);
  return 0;
}

// The emberd next to this binary in its runfiles (the data dependency), else the one in
// bazel-bin.
std::string DefaultEmberd(const char* argv0) {
  const std::string runfile = std::string(argv0) + ".runfiles/ember/daemon/emberd";
  return access(runfile.c_str(), X_OK) == 0 ? runfile : "bazel-bin/daemon/emberd";
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  CLI::App app{"coordinator_scale: one coordinating emberd serving simulated node daemons"};
  ember::bench::Flags flags;
  flags.emberd = ember::bench::DefaultEmberd(argv[0]);
  app.add_option("--nodes", flags.nodes, "simulated node daemons")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  app.add_option("--ranks-per-node", flags.ranks_per_node, "ranks each node joins")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  app.add_option("--steps-per-second", flags.steps_per_second, "global steps per second")
      ->check(CLI::Range(0.1, 10000.0))
      ->capture_default_str();
  app.add_option("--seconds", flags.seconds, "measured window")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  app.add_option("--warmup", flags.warmup, "seconds of steps before the window")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--batch", flags.batch, "batch size per rank")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  app.add_option("--steps-per-epoch", flags.steps_per_epoch,
                 "global steps per epoch (0: one epoch lasts the run)")
      ->capture_default_str();
  app.add_option("--samples", flags.samples, "the dataset's samples (overrides --steps-per-epoch)")
      ->capture_default_str();
  app.add_option("--spread", flags.spread,
                 "nodes' ticks spread over this fraction of a step (0: all at once)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--threads", flags.threads, "event loop threads simulating the nodes")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--peer-threads", flags.peer_threads,
                 "the started emberd's peer_threads (0: its default, one per core, at most 4)")
      ->check(CLI::Range(0, 64));
  app.add_flag("--rpc-client", flags.rpc_client,
               "simulated nodes run a real Cap'n Proto RpcSystem each, not the light client");
  app.add_flag("--per-rank", flags.per_rank,
               "one commit and one next RPC per rank (protocol 1), not one exchange per node");
  app.add_option("--emberd", flags.emberd, "the emberd binary to start")->capture_default_str();
  app.add_option("--coordinator", flags.coordinator,
                 "HOST:PORT of a running emberd (tls: off) instead of starting one");
  app.add_option("--coordinator-pid", flags.coordinator_pid,
                 "with --coordinator: its pid, for its CPU time");
  app.add_option("--journal", flags.journal, "with --coordinator: its jobs.journal");
  app.add_flag("--keep", flags.keep, "keep the started emberd's directory (its log, journal)");
  app.add_option("--json", flags.json, "append the result as a JSON line to this file");
  try {
    app.parse(argc, argv);
    if (flags.threads > flags.nodes) flags.threads = flags.nodes;
    return ember::bench::Run(flags);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "coordinator_scale: " << e.what() << "\n";
    return 1;
  }
}
