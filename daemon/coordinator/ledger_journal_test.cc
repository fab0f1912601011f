#include "daemon/coordinator/ledger_journal.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/fault_env.h"
#include "common/temp_dir_testing.h"
#include "daemon/coordinator/epoch_orders.h"
#include "daemon/coordinator/epoch_plan.h"
#include "daemon/coordinator/journal.h"

namespace ember::daemon {
namespace {

// Shuffled, from the start, with a fingerprint (which must survive the journal too).
JobParams Params(uint64_t num_samples, uint32_t batch_size, uint32_t world_size,
                 uint64_t seed = 7) {
  return JobParams{"fmnist", num_samples, batch_size, world_size, seed, true, 0, 0,
                   0xfeedfacecafebeefull};
}

// Group sync only when the test says (Sync, Compact), no compaction of its own: the file
// holds exactly what the test made durable.
LedgerJournalOptions Manual() {
  LedgerJournalOptions options;
  options.journal.group_interval_micros = 0;
  options.compact_min_bytes = 0;
  return options;
}

LedgerReplay OpenOk(Env& env, const std::string& path, JobLedger* ledger,
                    LedgerJournalOptions options = Manual()) {
  Result<LedgerReplay> replay = LedgerJournal::Open(env, path, ledger, options);
  INFO(replay.status().ToString());
  REQUIRE(replay.ok());
  REQUIRE(replay->journal != nullptr);
  return std::move(replay).value();
}

// A crash: what the journal file holds now (what was synced) is all a restarted daemon
// finds; the live objects are then dropped, and what their destructors write goes to the
// old file, which nobody reads again.
std::string CrashCopy(const std::string& path, int n) {
  const std::string copy = path + ".crash" + std::to_string(n);
  WriteTestFile(copy, ReadTestFile(path));
  return copy;
}

std::string Describe(const std::vector<JobSnapshot>& jobs) {
  std::ostringstream out;
  for (const JobSnapshot& s : jobs) {
    const JobParams& p = s.params;
    out << "job " << s.job << " {" << p.dataset << " n=" << p.num_samples << " b=" << p.batch_size
        << " w=" << p.world_size << " seed=" << p.seed << " shuffle=" << p.shuffle
        << " start=" << p.start_epoch << "/" << p.start_position << " fp=" << p.fingerprint
        << "} finished<" << s.finished_below;
    for (uint64_t e : s.finished_above) out << " +" << e;
    for (const JobSnapshot::Consumed& c : s.consumed) {
      out << " | e" << c.epoch << " r" << c.rank << " <" << c.done_below;
      for (uint64_t b : c.done_above) out << " +" << b;
    }
    out << "\n";
  }
  return out.str();
}

std::vector<uint64_t> ExpectedIds(const JobParams& p, uint64_t epoch) {
  Result<EpochPlan> plan = MakeEpochPlan(p.num_samples, p.batch_size, p.world_size, p.seed, epoch,
                                         p.shuffle, epoch == p.start_epoch ? p.start_position : 0);
  REQUIRE(plan.ok());
  const uint64_t start = epoch == p.start_epoch ? p.start_position : 0;
  std::vector<uint64_t> ids(plan->order.begin() + start, plan->order.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

void MustJoin(JobLedger& ledger, const std::string& job, uint32_t rank, const JobParams& p) {
  Status s = ledger.Join(job, rank, p);
  INFO(s.ToString());
  REQUIRE(s.ok());
}

// Leases and commits everything `rank` has left of `epoch`; returns the sample ids.
std::vector<uint64_t> ConsumeRest(JobLedger& ledger, const std::string& job, uint32_t rank,
                                  uint64_t epoch) {
  std::vector<uint64_t> ids;
  while (true) {
    Result<BatchLease> lease = ledger.Next(job, rank, epoch);
    if (!lease.ok()) {
      INFO(lease.status().ToString());
      REQUIRE(lease.status().code() == StatusCode::kFailedPrecondition);
      return ids;
    }
    ids.insert(ids.end(), lease->sample_ids.begin(), lease->sample_ids.end());
    REQUIRE(ledger.Commit(job, rank, epoch, lease->batch).ok());
  }
}

TEST_CASE("every kind of change round-trips through the journal") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("ledger_journal/round_trip") + "/jobs.journal";
  std::string before;
  {
    JobLedger ledger;
    LedgerReplay replay = OpenOk(*env, path, &ledger);
    CHECK(replay.created);
    CHECK(replay.jobs == 0);
    JobParams a = Params(100, 8, 2);
    a.shuffle = false;
    MustJoin(ledger, "a", 0, a);
    MustJoin(ledger, "a", 1, a);
    // Epoch 0 of rank 0 out of order, all of rank 1; epoch 1 partly.
    std::vector<BatchLease> leases;
    for (int i = 0; i < 4; ++i) leases.push_back(*ledger.Next("a", 0, 0));
    REQUIRE(ledger.Commit("a", 0, 0, leases[0].batch).ok());
    REQUIRE(ledger.Commit("a", 0, 0, leases[2].batch).ok());
    REQUIRE(ledger.Commit("a", 0, 0, leases[3].batch).ok());
    ConsumeRest(ledger, "a", 1, 0);
    ConsumeRest(ledger, "a", 1, 1);
    // Job "b" resumed mid-epoch 3 (epochs before it finished) and with an unusual name.
    JobParams b = Params(1000, 16, 3, 99);
    b.start_epoch = 3;
    b.start_position = 250;
    b.shuffle_shape = ShuffleShape::ByShards({0, 100, 400, 1000}, 3);  // shuffled by shards
    const std::string b_name = "b\xff\xfe name \xc3\xbc";  // not UTF-8 throughout
    MustJoin(ledger, b_name, 2, b);
    ConsumeRest(ledger, b_name, 2, 3);
    // Job "gone" is forgotten; job "replaced" restarts from a checkpoint nobody is in.
    const JobParams g = Params(10, 5, 1);
    MustJoin(ledger, "gone", 0, g);
    ConsumeRest(ledger, "gone", 0, 0);
    ledger.Leave("gone", 0);
    JobParams r = Params(64, 4, 2);
    MustJoin(ledger, "replaced", 0, r);
    ConsumeRest(ledger, "replaced", 0, 0);
    ledger.Leave("replaced", 0);
    r.start_position = 16;
    MustJoin(ledger, "replaced", 1, r);
    REQUIRE(ledger.Next("replaced", 1, 0).ok());  // a lease: not journaled

    before = Describe(ledger.Snapshot());
    REQUIRE(ledger.Snapshot().size() == 3);
    REQUIRE(replay.journal->journal().Sync().ok());
    CHECK(replay.journal->status().ok());
  }
  JobLedger ledger;
  LedgerReplay replay = OpenOk(*env, path, &ledger);
  CHECK_FALSE(replay.created);
  CHECK(replay.torn_bytes == 0);
  CHECK(replay.jobs == 3);
  CHECK(replay.commits > 20);
  CHECK(Describe(ledger.Snapshot()) == before);
  // Nobody is joined to a replayed job.
  for (const JobSummary& s : ledger.Summaries())
    for (const RankProgress& r : s.ranks) CHECK_FALSE(r.joined);
  // Job "b"'s shuffle by shards came back: a rank asking for a shuffle over the set is refused.
  JobParams b = Params(1000, 16, 3, 99);
  b.start_epoch = 3;
  b.start_position = 250;
  const Status over_set = ledger.Join("b\xff\xfe name \xc3\xbc", 0, b);
  CHECK(over_set.code() == StatusCode::kInvalidArgument);
  CHECK(over_set.message().find("shuffle shards") != std::string::npos);
  b.shuffle_shape = ShuffleShape::ByShards({0, 100, 400, 1000}, 3);
  CHECK(ledger.Join("b\xff\xfe name \xc3\xbc", 0, b).ok());
}

// One rank's side of a random run: which of its leases it holds.
struct SimRank {
  bool joined = false;
  uint64_t epoch = 0;                // the epoch it asks leases of
  std::vector<BatchLease> held;      // leased, not consumed
};

// What one crash case went through.
struct CrashStats {
  uint64_t durable = 0;      // samples consumed and synced before the crash
  uint64_t lost = 0;         // consumed but not synced: served again after it
  uint64_t compactions = 0;
};

// A random interleaving of joins, leases, commits (in any order), leaves, syncs and
// compactions, then a crash; the restarted ledger serves each rank its unconsumed batches.
CrashStats RunCrashCase(uint32_t seed) {
  CrashStats stats;
  std::mt19937_64 rng(seed);
  auto pick = [&rng](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  const uint32_t world = 1 + pick(4);
  JobParams p;
  do {  // a tail step without a sample for every rank is refused: draw again
    p = Params(20 + pick(200), 1 + pick(8), world, seed);
    p.shuffle = pick(4) != 0;
    if (pick(3) == 0) {
      p.start_epoch = 1;
      p.start_position = pick(p.num_samples / 2);
    }
  } while (!MakeStepLayout(p.num_samples, p.batch_size, world).ok() ||
           !MakeStepLayout(p.num_samples, p.batch_size, world, p.start_position).ok());
  const uint64_t epochs = p.start_epoch + 2;
  const uint64_t crash_step = pick(400);
  INFO("seed " << seed << ": n=" << p.num_samples << " b=" << p.batch_size << " world=" << world
               << " start=" << p.start_epoch << "/" << p.start_position << " crash at step "
               << crash_step);

  auto env = NewPosixEnv();
  const std::string path =
      FreshTestDir("ledger_journal/crash/" + std::to_string(seed)) + "/jobs.journal";
  // Per epoch: sample ids of commits that are durable (synced), and of those not yet.
  std::map<uint64_t, std::vector<uint64_t>> durable, volatile_ids;
  auto make_durable = [&] {
    for (auto& [epoch, ids] : volatile_ids) durable[epoch].insert(durable[epoch].end(), ids.begin(), ids.end());
    volatile_ids.clear();
  };
  std::string crashed;
  {
    JobLedger ledger;
    LedgerReplay replay = OpenOk(*env, path, &ledger);
    std::vector<SimRank> ranks(world);
    for (uint64_t step = 0; step < crash_step; ++step) {
      const uint32_t r = pick(world);
      SimRank& rank = ranks[r];
      const uint64_t action = pick(100);
      if (!rank.joined) {
        MustJoin(ledger, "job", r, p);
        rank.joined = true;
        rank.epoch = p.start_epoch;
      } else if (action < 45) {
        if (rank.epoch >= epochs) continue;
        Result<BatchLease> lease = ledger.Next("job", r, rank.epoch);
        if (lease.ok()) {
          rank.held.push_back(std::move(lease).value());
        } else {
          REQUIRE(lease.status().code() == StatusCode::kFailedPrecondition);
          ++rank.epoch;
        }
      } else if (action < 85) {
        if (rank.held.empty()) continue;
        const size_t i = pick(rank.held.size());
        const BatchLease lease = rank.held[i];
        rank.held.erase(rank.held.begin() + i);
        REQUIRE(ledger.Commit("job", r, lease.epoch, lease.batch).ok());
        auto& ids = volatile_ids[lease.epoch];
        ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
      } else if (action < 92) {
        // Leaving with every other rank gone would end the job, not interrupt it.
        bool other_joined = false;
        for (uint32_t o = 0; o < world; ++o) other_joined = other_joined || (o != r && ranks[o].joined);
        if (!other_joined) continue;
        ledger.Leave("job", r);
        rank.joined = false;
        rank.held.clear();
      } else if (action < 97) {
        REQUIRE(replay.journal->journal().Sync().ok());
        make_durable();
      } else {
        REQUIRE(replay.journal->Compact().ok());
        make_durable();
      }
    }
    if (pick(2) == 0) {
      REQUIRE(replay.journal->journal().Sync().ok());
      make_durable();
    }
    REQUIRE(replay.journal->status().ok());
    stats.compactions = replay.journal->compactions();
    crashed = CrashCopy(path, 0);
    if (pick(2) == 0) {
      // A crash in the middle of a group write leaves part of a record.
      std::string contents = ReadTestFile(crashed);
      contents += std::string("\x20\0\0\0\x11\x22", 6);
      WriteTestFile(crashed, contents);
    }
  }  // the crash: the ledger and the journal are gone

  JobLedger ledger;
  LedgerReplay replay = OpenOk(*env, crashed, &ledger);
  for (uint32_t r = 0; r < world; ++r) MustJoin(ledger, "job", r, p);
  for (uint64_t epoch = p.start_epoch; epoch < epochs; ++epoch) {
    std::vector<uint64_t> seen = durable[epoch];
    for (uint32_t r = 0; r < world; ++r) {
      std::vector<uint64_t> after = ConsumeRest(ledger, "job", r, epoch);
      seen.insert(seen.end(), after.begin(), after.end());
    }
    std::sort(seen.begin(), seen.end());
    INFO("epoch " << epoch << ": " << durable[epoch].size() << " durable before the crash, "
                  << volatile_ids[epoch].size() << " lost with it");
    REQUIRE(seen == ExpectedIds(p, epoch));
    stats.durable += durable[epoch].size();
    stats.lost += volatile_ids[epoch].size();
  }
  return stats;
}

TEST_CASE("after a crash at any point, each rank is served exactly its unconsumed batches") {
  CrashStats total;
  for (uint32_t seed = 1; seed <= 120; ++seed) {
    const CrashStats stats = RunCrashCase(seed);
    total.durable += stats.durable;
    total.lost += stats.lost;
    total.compactions += stats.compactions;
  }
  // The cases cover durable commits, commits a crash lost, and compactions before it.
  CHECK(total.durable > 1000);
  CHECK(total.lost > 100);
  CHECK(total.compactions > 20);
}

// Several nodes' daemons serving one job through a coordinator that crashes: what a
// trainer read, per (epoch, step), in one run (each entry a rank's batch).
using StepLog = std::map<std::pair<uint64_t, uint64_t>, std::vector<uint64_t>>;

struct Topology {
  uint32_t nodes = 1;
  uint32_t ranks_per_node = 1;
  uint32_t batch = 1;
  uint32_t world() const { return nodes * ranks_per_node; }
};

// One node's daemon: its ranks' leases (as RemoteCoordinator keeps them: epoch -> batch ->
// consumed), what each trainer has yet to read, and the commits not yet sent.
struct SimNode {
  struct Rank {
    uint64_t epoch = 0;                  // it asks leases of this epoch
    std::vector<BatchLease> ring;        // leased, not yet read by the trainer
    std::map<uint64_t, std::map<uint64_t, bool>> held;
  };
  std::vector<Rank> ranks;
  std::vector<RankBatch> outbox;  // commits for the next exchange
};

// Runs `epochs` epochs of job `p` on `topo`: the nodes exchange in batches (commits, then
// wants for every rank with a free ring slot of 2), trainers read in lease order, the
// journal syncs now and then, and the coordinator crashes at the ticks in `crashes`
// (losing what was not synced); then every node joins its ranks again reporting what
// they hold, as the proxy does. Returns what the trainers read.
StepLog RunNodes(uint32_t seed, const JobParams& p, const Topology& topo, uint64_t epochs,
                 const std::set<uint64_t>& crashes, const std::string& dir) {
  std::mt19937_64 rng(seed);
  auto pick = [&rng](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  auto env = NewPosixEnv();
  std::string path = dir + "/jobs.journal";
  auto ledger = std::make_unique<JobLedger>();
  LedgerReplay replay = OpenOk(*env, path, ledger.get());
  std::vector<SimNode> nodes(topo.nodes);
  EpochOrders orders;  // each node's: the batched leases carry positions only
  auto join_all = [&](bool again) {
    for (uint32_t n = 0; n < topo.nodes; ++n)
      for (uint32_t i = 0; i < topo.ranks_per_node; ++i) {
        std::vector<HeldBatch> held;
        SimNode::Rank& rank = nodes[n].ranks[i];
        while (rank.held.size() > 2) rank.held.erase(rank.held.begin());
        for (const auto& [epoch, batches] : rank.held)
          for (const auto& [batch, consumed] : batches) held.push_back({epoch, batch, consumed});
        if (!again) held.clear();
        Status joined = ledger->Join("job", n * topo.ranks_per_node + i, p, held);
        INFO(joined.ToString());
        REQUIRE(joined.ok());
      }
  };
  for (SimNode& node : nodes) {
    node.ranks.resize(topo.ranks_per_node);
    for (SimNode::Rank& rank : node.ranks) rank.epoch = p.start_epoch;
  }
  join_all(false);

  StepLog log;
  auto done = [&] {
    for (const SimNode& node : nodes)
      for (const SimNode::Rank& rank : node.ranks)
        if (rank.epoch < epochs || !rank.ring.empty()) return false;
    return true;
  };
  for (uint64_t tick = 0; !done(); ++tick) {
    REQUIRE(tick < 100000);
    if (crashes.count(tick) != 0) {
      // The coordinator dies: only the synced journal survives; the commits in flight
      // (the outboxes) are lost, but each rank's node reports them when joining again.
      const std::string crashed = CrashCopy(path, static_cast<int>(tick));
      replay.journal.reset();  // it observes the old ledger: it goes first
      ledger = std::make_unique<JobLedger>();
      replay = OpenOk(*env, crashed, ledger.get());
      path = crashed;
      for (SimNode& node : nodes) node.outbox.clear();
      join_all(true);
      continue;
    }
    const uint32_t n = pick(topo.nodes);
    SimNode& node = nodes[n];
    const uint64_t action = pick(50);
    if (action < 20) {
      // A trainer reads its next batch.
      const uint32_t i = pick(topo.ranks_per_node);
      SimNode::Rank& rank = node.ranks[i];
      if (rank.ring.empty()) continue;
      const BatchLease lease = rank.ring.front();
      rank.ring.erase(rank.ring.begin());
      auto& ids = log[{lease.epoch, lease.batch}];
      REQUIRE(lease.sample_ids.empty());
      const std::vector<uint64_t> read =
          orders.Ids({p.num_samples, p.seed, p.shuffle, {}}, lease.epoch, lease.positions);
      ids.insert(ids.end(), read.begin(), read.end());
      rank.held[lease.epoch][lease.batch] = true;
      node.outbox.push_back({n * topo.ranks_per_node + i, lease.epoch, lease.batch});
    } else if (action < 49) {
      // The node's exchange.
      for (const Status& s : ledger->Commit("job", node.outbox)) {
        INFO(s.ToString());
        REQUIRE(s.ok());
      }
      node.outbox.clear();
      std::vector<RankWant> wants;
      for (uint32_t i = 0; i < topo.ranks_per_node; ++i)
        if (node.ranks[i].ring.size() < 2 && node.ranks[i].epoch < epochs)
          wants.push_back({n * topo.ranks_per_node + i, node.ranks[i].epoch});
      std::vector<Result<BatchLease>> leases = ledger->Next("job", wants);
      for (size_t w = 0; w < wants.size(); ++w) {
        SimNode::Rank& rank = node.ranks[wants[w].rank % topo.ranks_per_node];
        if (!leases[w].ok()) {
          INFO(leases[w].status().ToString());
          REQUIRE(leases[w].status().code() == StatusCode::kFailedPrecondition);
          ++rank.epoch;
          continue;
        }
        rank.held[leases[w]->epoch][leases[w]->batch] = false;
        rank.ring.push_back(std::move(leases[w]).value());
      }
    } else {
      REQUIRE(replay.journal->journal().Sync().ok());
    }
  }
  return log;
}

TEST_CASE("nodes batching for their ranks through coordinator crashes: exactly once, same steps") {
  uint64_t crashes_total = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    auto pick = [&rng](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
    // Two topologies with one global batch G = world x batch: 12 = 1x12, 2x6, 3x4, 4x3...
    const uint32_t g_choices[] = {12, 24};
    const uint32_t g = g_choices[pick(2)];
    std::vector<Topology> same_g;
    for (uint32_t nodes = 1; nodes <= 4; ++nodes)
      for (uint32_t per_node = 1; per_node <= 4; ++per_node)
        if (g % (nodes * per_node) == 0) same_g.push_back({nodes, per_node, g / (nodes * per_node)});
    const Topology a = same_g[pick(same_g.size())], b = same_g[pick(same_g.size())];
    JobParams p = Params(g * (3 + pick(6)) + pick(g / 2 + 1), 0, 0, seed);
    if (pick(3) == 0) {
      p.start_epoch = 1;
      p.start_position = pick(p.num_samples / 2);
    }
    const uint64_t epochs = p.start_epoch + 2;
    std::set<uint64_t> crashes;
    for (uint64_t c = pick(3); c > 0; --c) crashes.insert(1 + pick(400));
    crashes_total += crashes.size();
    INFO("seed " << seed << ": n=" << p.num_samples << " G=" << g << " start=" << p.start_epoch
                 << "/" << p.start_position << "; A " << a.nodes << "x" << a.ranks_per_node
                 << " b" << a.batch << ", B " << b.nodes << "x" << b.ranks_per_node << " b"
                 << b.batch << "; " << crashes.size() << " crashes");
    JobParams pa = p, pb = p;
    pa.batch_size = a.batch;
    pa.world_size = a.world();
    pb.batch_size = b.batch;
    pb.world_size = b.world();
    if (!MakeStepLayout(p.num_samples, a.batch, a.world()).ok() ||
        !MakeStepLayout(p.num_samples, a.batch, a.world(), p.start_position).ok() ||
        !MakeStepLayout(p.num_samples, b.batch, b.world()).ok() ||
        !MakeStepLayout(p.num_samples, b.batch, b.world(), p.start_position).ok())
      continue;  // a tail too small for the ranks: refused at join, tested elsewhere
    const std::string dir = FreshTestDir("ledger_journal/nodes/" + std::to_string(seed));
    const StepLog with_crashes =
        RunNodes(seed, pa, a, epochs, crashes, FreshTestDir(dir + "/a"));
    const StepLog other_topology =
        RunNodes(seed + 1000, pb, b, epochs, {}, FreshTestDir(dir + "/b"));
    // Every sample exactly once per epoch.
    for (uint64_t epoch = p.start_epoch; epoch < epochs; ++epoch) {
      std::vector<uint64_t> seen;
      for (const auto& [step, ids] : with_crashes)
        if (step.first == epoch) seen.insert(seen.end(), ids.begin(), ids.end());
      std::sort(seen.begin(), seen.end());
      INFO("epoch " << epoch);
      REQUIRE(seen == ExpectedIds(pa, epoch));
    }
    // The same samples in each global step on both topologies.
    REQUIRE(with_crashes.size() == other_topology.size());
    for (const auto& [step, ids] : with_crashes) {
      INFO("epoch " << step.first << " step " << step.second);
      std::vector<uint64_t> x = ids, y = other_topology.at(step);
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
      REQUIRE(x == y);
    }
  }
  CHECK(crashes_total > 40);
}

TEST_CASE("a replayed job lasts until every rank joined again and all left") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("ledger_journal/rejoin") + "/jobs.journal";
  const JobParams p = Params(40, 5, 2);
  {
    JobLedger ledger;
    LedgerReplay replay = OpenOk(*env, path, &ledger);
    MustJoin(ledger, "job", 0, p);
    MustJoin(ledger, "job", 1, p);
    REQUIRE(ledger.Commit("job", 0, 0, ledger.Next("job", 0, 0)->batch).ok());
    REQUIRE(replay.journal->journal().Sync().ok());
    CrashCopy(path, 0);
  }
  const std::string crashed = path + ".crash0";
  {
    JobLedger ledger;
    LedgerReplay replay = OpenOk(*env, crashed, &ledger);
    // A rank out of range does not take the replayed job with it.
    CHECK(ledger.Join("job", 2, p).code() == StatusCode::kInvalidArgument);
    MustJoin(ledger, "job", 0, p);
    ledger.Leave("job", 0);
    REQUIRE(ledger.Snapshot().size() == 1);
    MustJoin(ledger, "job", 0, p);
    CHECK(ledger.Next("job", 0, 0)->batch == 1);
    MustJoin(ledger, "job", 1, p);
    ledger.Leave("job", 0);
    ledger.Leave("job", 1);
    CHECK(ledger.Snapshot().empty());
  }
  // The end of the job was journaled too.
  JobLedger ledger;
  LedgerReplay replay = OpenOk(*env, crashed, &ledger);
  CHECK(replay.jobs == 0);
  CHECK(ledger.Snapshot().empty());
}

TEST_CASE("compaction keeps the state and drops what finished epochs and ended jobs left") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("ledger_journal/compact") + "/jobs.journal";
  const JobParams p = Params(3000, 4, 2);  // 375 batches per rank and epoch
  std::string before;
  uint64_t compacted_bytes = 0;
  {
    JobLedger ledger;
    LedgerJournalOptions options = Manual();
    options.journal.max_record_bytes = 200;  // the snapshot's lists span several records
    LedgerReplay replay = OpenOk(*env, path, &ledger, options);
    MustJoin(ledger, "job", 0, p);
    MustJoin(ledger, "job", 1, p);
    MustJoin(ledger, "short", 0, Params(10, 10, 1));
    ConsumeRest(ledger, "short", 0, 0);
    ledger.Leave("short", 0);
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      ConsumeRest(ledger, "job", 0, epoch);
      ConsumeRest(ledger, "job", 1, epoch);
    }
    // Epoch 2: rank 0 consumed every third batch only, rank 1 a prefix.
    std::vector<BatchLease> leases;
    while (true) {
      Result<BatchLease> lease = ledger.Next("job", 0, 2);
      if (!lease.ok()) break;
      leases.push_back(*lease);
    }
    for (size_t i = 0; i < leases.size(); i += 3)
      REQUIRE(ledger.Commit("job", 0, 2, leases[i].batch).ok());
    for (int i = 0; i < 10; ++i) REQUIRE(ledger.Commit("job", 1, 2, ledger.Next("job", 1, 2)->batch).ok());

    const uint64_t grown = replay.journal->journal().file_bytes();
    REQUIRE(replay.journal->Compact().ok());
    CHECK(replay.journal->compactions() == 1);
    compacted_bytes = replay.journal->journal().file_bytes();
    INFO(grown << " bytes before compaction, " << compacted_bytes << " after");
    CHECK(compacted_bytes * 4 < grown);
    // Changes after a compaction go on after the snapshot.
    REQUIRE(ledger.Commit("job", 1, 2, ledger.Next("job", 1, 2)->batch).ok());
    REQUIRE(replay.journal->journal().Sync().ok());
    before = Describe(ledger.Snapshot());
    CrashCopy(path, 0);
  }
  JobLedger ledger;
  LedgerReplay replay = OpenOk(*env, path + ".crash0", &ledger);
  CHECK(replay.jobs == 1);
  CHECK(Describe(ledger.Snapshot()) == before);
  MustJoin(ledger, "job", 1, p);
  CHECK(ledger.Next("job", 1, 2)->batch == 11);
  // Epochs 0 and 1 stay finished.
  CHECK(ledger.Next("job", 1, 1).status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("the journal compacts itself while ranks commit from several threads") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("ledger_journal/background") + "/jobs.journal";
  const uint32_t kWorld = 4;
  const JobParams p = Params(2000, 2, kWorld);  // 250 batches per rank and epoch
  std::string before;
  {
    JobLedger ledger;
    LedgerJournalOptions options;
    options.journal.group_interval_micros = 1000;
    options.compact_min_bytes = 4096;
    LedgerReplay replay = OpenOk(*env, path, &ledger, options);
    for (uint32_t r = 0; r < kWorld; ++r) MustJoin(ledger, "job", r, p);
    std::vector<std::thread> threads;
    std::vector<Status> errors(kWorld);
    for (uint32_t r = 0; r < kWorld; ++r) {
      threads.emplace_back([&, r] {
        for (uint64_t epoch = 0; epoch < 4; ++epoch) {
          while (true) {
            Result<BatchLease> lease = ledger.Next("job", r, epoch);
            if (!lease.ok()) break;
            Status s = ledger.Commit("job", r, epoch, lease->batch);
            if (!s.ok()) errors[r] = s;
          }
        }
        // Part of a fifth epoch, so there is progress to keep.
        for (uint32_t i = 0; i < 7 + r; ++i) {
          Result<BatchLease> lease = ledger.Next("job", r, 4);
          if (lease.ok()) (void)ledger.Commit("job", r, 4, lease->batch);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const Status& s : errors) CHECK(s.ok());
    // The file grew far past 4 KiB, so the background thread compacts it (maybe only
    // now that the ranks are done).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (replay.journal->compactions() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(replay.journal->compactions() >= 1);
    REQUIRE(replay.journal->Compact().ok());
    CHECK(replay.journal->status().ok());
    // 4 epochs x 1000 commits of about 14 bytes each were written; far less is left.
    CHECK(replay.journal->journal().file_bytes() < 4096);
    before = Describe(ledger.Snapshot());
    Journal& journal = replay.journal->journal();
    REQUIRE(journal.WaitDurable(journal.last_sequence(), 5000).ok());
  }
  JobLedger ledger;
  LedgerReplay replay = OpenOk(*env, path, &ledger);
  CHECK(Describe(ledger.Snapshot()) == before);
}

TEST_CASE("changes made while a compaction waits for the disk come after its snapshot") {
  auto posix = NewPosixEnv();
  FaultEnv env(posix.get());
  const std::string path = FreshTestDir("ledger_journal/during_compaction") + "/jobs.journal";
  const JobParams p = Params(100, 5, 1);
  std::string before;
  {
    JobLedger ledger;
    LedgerReplay replay = OpenOk(env, path, &ledger);
    MustJoin(ledger, "job", 0, p);
    REQUIRE(ledger.Commit("job", 0, 0, ledger.Next("job", 0, 0)->batch).ok());
    // A group sync hangs on the disk, holding the file; the compaction takes its snapshot
    // and waits for the file behind it.
    env.HoldSyncs(path);
    std::thread group_sync([&] { CHECK(replay.journal->journal().Sync().ok()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Status compacted;
    std::thread compaction([&] { compacted = replay.journal->Compact(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Not in the snapshot, and appended before the rewrite started: they must not go
    // into the old file with the records the rewrite drops.
    for (int i = 0; i < 5; ++i)
      REQUIRE(ledger.Commit("job", 0, 0, ledger.Next("job", 0, 0)->batch).ok());
    env.ClearFaults();
    group_sync.join();
    compaction.join();
    INFO(compacted.ToString());
    REQUIRE(compacted.ok());
    REQUIRE(replay.journal->journal().Sync().ok());
    before = Describe(ledger.Snapshot());
    CrashCopy(path, 0);
  }
  JobLedger ledger;
  LedgerReplay replay = OpenOk(*posix, path + ".crash0", &ledger);
  CHECK(Describe(ledger.Snapshot()) == before);
  MustJoin(ledger, "job", 0, p);
  CHECK(ledger.Next("job", 0, 0)->batch == 6);
}

// A journal file of `records` (raw Journal records).
std::string WriteRecords(Env& env, const std::string& path,
                         const std::vector<std::string>& records) {
  JournalOptions options;
  options.group_interval_micros = 0;
  Result<JournalReplay> opened = Journal::Open(env, path, options);
  REQUIRE(opened.ok());
  for (const std::string& record : records) REQUIRE(opened->journal->Append(record).ok());
  REQUIRE(opened->journal->Sync().ok());
  return path;
}

TEST_CASE("a node's batched commits are one small record per step and replay exactly") {
  auto env = NewPosixEnv();
  const std::string path = FreshTestDir("ledger_journal/batched") + "/jobs.journal";
  const JobParams p = Params(16 * 8 * 10, 16, 8);
  std::string before;
  uint64_t bytes_per_step = 0;
  {
    JobLedger ledger;
    LedgerReplay replay = OpenOk(*env, path, &ledger);
    for (uint32_t r = 0; r < 8; ++r) MustJoin(ledger, "j", r, p);
    REQUIRE(replay.journal->journal().Sync().ok());
    const uint64_t start = replay.journal->journal().file_bytes();
    // Ranks 0..7 as one node for 5 steps; then ranks {0,1,2,4,5,7} (three runs) for 1.
    std::vector<RankWant> wants;
    for (uint32_t r = 0; r < 8; ++r) wants.push_back({r, 0});
    for (int step = 0; step < 5; ++step) {
      std::vector<RankBatch> commits;
      for (const Result<BatchLease>& lease : ledger.Next("j", wants)) {
        REQUIRE(lease.ok());
        commits.push_back({static_cast<uint32_t>(commits.size()), 0, lease->batch});
      }
      for (const Status& s : ledger.Commit("j", commits)) REQUIRE(s.ok());
    }
    REQUIRE(replay.journal->journal().Sync().ok());
    bytes_per_step = (replay.journal->journal().file_bytes() - start) / 5;
    std::vector<RankBatch> gappy;
    for (const Result<BatchLease>& lease : ledger.Next("j", wants)) REQUIRE(lease.ok());
    for (uint32_t r : {0u, 1u, 2u, 4u, 5u, 7u}) gappy.push_back({r, 0, 5});
    for (const Status& s : ledger.Commit("j", gappy)) REQUIRE(s.ok());
    before = Describe(ledger.Snapshot());
    REQUIRE(replay.journal->journal().Sync().ok());
  }
  // 8 ranks' commits of a step: one record (8 bytes of framing, ~7 of payload), not 8.
  CHECK(bytes_per_step <= 16);
  JobLedger ledger;
  LedgerReplay replay = OpenOk(*env, path, &ledger);
  CHECK(replay.commits == 5 * 8 + 6);
  CHECK(Describe(ledger.Snapshot()) == before);
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

TEST_CASE("a record that does not decode or apply is kDataLoss naming it") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("ledger_journal/corrupt");
  const std::string format = Bytes({1, 1});
  // Job id 1 "j": dataset "d", 10 samples, batch 5, world 1, seed 0, shuffle, start 0/0, fp 0.
  const std::string job = Bytes({2, 1, 1, 'j', 1, 'd', 10, 5, 1, 0, 1, 0, 0, 0});
  struct Case {
    const char* what;
    std::vector<std::string> records;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"no format record", {job}, "record 0 (job): the first record is not a format record"},
      {"a newer version", {Bytes({1, 2})}, "record 0 (format): version 2, this build reads version 1"},
      {"an unknown tag", {format, job, Bytes({9, 1})}, "record 2 (tag 9): unknown record tag 9"},
      {"a commit for a job never created", {format, Bytes({3, 7, 0, 0, 0})},
       "record 1 (commit): job id 7 is not live"},
      {"a commit cut short", {format, job, Bytes({3, 1, 0})},
       "record 2 (commit): epoch: record ends at byte 3"},
      {"a batch out of range", {format, job, Bytes({3, 1, 0, 0, 2})},
       "record 2 (commit): job 'j': rank 0: batch 2 of epoch 0 is out of range (2 batches)"},
      {"a rank out of range", {format, job, Bytes({6, 1, 0, 1, 1, 0})},
       "record 2 (consumed): job 'j': rank 1 is out of range for world_size 1"},
      {"bytes left over", {format, job, Bytes({4, 1, 0})}, "record 2 (forget): 1 bytes left over"},
      {"an impossible plan", {format, Bytes({2, 1, 1, 'j', 1, 'd', 10, 0, 1, 0, 1, 0, 0, 0})},
       "record 1 (job): job 'j'"},
      {"a list longer than its record", {format, job, Bytes({5, 1, 0, 100, 1})},
       "record 2 (finished): count: 100 entries"},
      {"a run of no ranks", {format, job, Bytes({7, 1, 0, 0, 1, 0, 0})},
       "record 2 (commits): ranks 0 + 0 are out of range"},
      {"a run past the world", {format, job, Bytes({7, 1, 0, 0, 1, 0, 2})},
       "record 2 (commits): job 'j': rank 1 is out of range for world_size 1"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(c.what);
    const std::string path =
        WriteRecords(*env, dir + "/" + std::to_string(i) + ".journal", c.records);
    JobLedger ledger;
    Result<LedgerReplay> replay = LedgerJournal::Open(*env, path, &ledger, Manual());
    REQUIRE_FALSE(replay.ok());
    INFO(replay.status().ToString());
    CHECK(replay.status().code() == StatusCode::kDataLoss);
    CHECK(replay.status().message().rfind(path + ": ", 0) == 0);
    CHECK(replay.status().message().find(c.expected) != std::string::npos);
  }

  // Damage the journal itself finds names the byte offset, and the file stays as it is.
  const std::string path = WriteRecords(*env, dir + "/flipped.journal",
                                        {format, job, Bytes({3, 1, 0, 0, 0}), Bytes({3, 1, 0, 0, 1})});
  std::string contents = ReadTestFile(path);
  contents[Journal::kHeaderBytes + 8 + 2 + 8 + 3] ^= 0x40;
  WriteTestFile(path, contents);
  JobLedger ledger;
  Result<LedgerReplay> replay = LedgerJournal::Open(*env, path, &ledger, Manual());
  REQUIRE_FALSE(replay.ok());
  CHECK(replay.status().code() == StatusCode::kDataLoss);
  CHECK(replay.status().message().find(path + ": corrupt journal record at byte 26") !=
        std::string::npos);
  CHECK(ReadTestFile(path) == contents);
}

}  // namespace
}  // namespace ember::daemon
