#include "daemon/coordinator/job_ledger.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <set>

namespace ember::daemon {

class JobLedgerTestPeer {
 public:
  // Epochs whose plan and lease records are held in memory.
  static size_t InFlightEpochs(const JobLedger& ledger, const std::string& job) {
    MutexLock lock(&ledger.mu_);
    return ledger.jobs_.at(job).epochs.size();
  }
  // Finished epochs remembered one by one (those above the contiguous watermark).
  static size_t FinishedEpochsRecorded(const JobLedger& ledger, const std::string& job) {
    MutexLock lock(&ledger.mu_);
    return ledger.jobs_.at(job).finished_above.size();
  }
};

namespace {

JobParams Params(uint64_t num_samples, uint32_t batch_size, uint32_t world_size,
                 uint64_t seed = 7) {
  JobParams p;
  p.dataset = "fmnist";
  p.num_samples = num_samples;
  p.batch_size = batch_size;
  p.world_size = world_size;
  p.seed = seed;
  p.shuffle = true;
  return p;
}

void MustJoin(JobLedger& ledger, const std::string& job, uint32_t rank, const JobParams& p) {
  Status s = ledger.Join(job, rank, p);
  INFO(s.ToString());
  REQUIRE(s.ok());
}

BatchLease MustNext(JobLedger& ledger, const std::string& job, uint32_t rank, uint64_t epoch) {
  Result<BatchLease> lease = ledger.Next(job, rank, epoch);
  INFO(lease.status().ToString());
  REQUIRE(lease.ok());
  return std::move(lease).value();
}

void MustCommit(JobLedger& ledger, const std::string& job, uint32_t rank, const BatchLease& lease) {
  Status s = ledger.Commit(job, rank, lease.epoch, lease.batch);
  INFO(s.ToString());
  REQUIRE(s.ok());
}

std::vector<uint64_t> Iota(uint64_t n) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), uint64_t{0});
  return v;
}

void CheckExactlyOnce(std::vector<uint64_t> ids, uint64_t num_samples) {
  std::sort(ids.begin(), ids.end());
  CHECK(ids == Iota(num_samples));
}

const JobSummary* FindSummary(const std::vector<JobSummary>& summaries, const std::string& job) {
  for (const JobSummary& s : summaries) {
    if (s.job == job) return &s;
  }
  return nullptr;
}

TEST_CASE("Join: a mismatched param is named with both values") {
  JobLedger ledger;
  MustJoin(ledger, "j", 0, Params(1000, 64, 2));

  Status s = ledger.Join("j", 1, Params(1000, 32, 2));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "batch_size: job 'j' has 64, rank 1 asked for 32");

  JobParams other_dataset = Params(1000, 64, 2);
  other_dataset.dataset = "cifar";
  s = ledger.Join("j", 1, other_dataset);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "dataset: job 'j' has 'fmnist', rank 1 asked for 'cifar'");

  s = ledger.Join("j", 1, Params(999, 64, 2));
  CHECK(s.message() == "num_samples: job 'j' has 1000, rank 1 asked for 999");
  s = ledger.Join("j", 1, Params(1000, 64, 3));
  CHECK(s.message() == "world_size: job 'j' has 2, rank 1 asked for 3");
  s = ledger.Join("j", 1, Params(1000, 64, 2, 8));
  CHECK(s.message() == "seed: job 'j' has 7, rank 1 asked for 8");
  JobParams no_shuffle = Params(1000, 64, 2);
  no_shuffle.shuffle = false;
  s = ledger.Join("j", 1, no_shuffle);
  CHECK(s.message() == "shuffle: job 'j' has true, rank 1 asked for false");

  // None of the failed joins registered rank 1.
  CHECK(ledger.Next("j", 1, 0).status().code() == StatusCode::kNotFound);
  MustJoin(ledger, "j", 1, Params(1000, 64, 2));
}

TEST_CASE("Join: double join, rank out of range, impossible plan") {
  JobLedger ledger;
  MustJoin(ledger, "j", 0, Params(1000, 64, 2));
  CHECK(ledger.Join("j", 0, Params(1000, 64, 2)).code() == StatusCode::kAlreadyExists);

  Status out_of_range = ledger.Join("j", 2, Params(1000, 64, 2));
  CHECK(out_of_range.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(out_of_range.message(), Catch::Contains("rank 2"));
  CHECK(ledger.Join("fresh", 3, Params(1000, 64, 3)).code() == StatusCode::kInvalidArgument);
  // The failed first join did not create the job.
  CHECK(ledger.BatchesPerRank("fresh").status().code() == StatusCode::kNotFound);

  Status impossible = ledger.Join("tiny", 0, Params(3, 2, 4));
  CHECK(impossible.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(impossible.message(), Catch::StartsWith("job 'tiny': "));
  CHECK(ledger.Join("w0", 0, Params(10, 2, 0)).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Join: a world larger than max_world_size makes no job; a replayed one keeps its own") {
  JobLedger ledger(1024);
  Status huge = ledger.Join("big", 0, Params(1u << 22, 1, 1000000));
  CHECK(huge.message() ==
        "job 'big': rank 0: world_size: 1000000 is more than 1024 ranks (max_world_size)");
  CHECK(ledger.BatchesPerRank("big").status().code() == StatusCode::kNotFound);
  REQUIRE(ledger.ReplayJob("old", Params(1u << 16, 1, 2048)).ok());
  MustJoin(ledger, "old", 5, Params(1u << 16, 1, 2048));
}

TEST_CASE("Next: unknown job or rank, and the end of a rank's epoch") {
  JobLedger ledger;
  CHECK(ledger.Next("nope", 0, 0).status().code() == StatusCode::kNotFound);
  MustJoin(ledger, "j", 0, Params(60000, 64, 2));
  CHECK(ledger.Next("j", 1, 0).status().code() == StatusCode::kNotFound);
  CHECK(ledger.Next("j", 5, 0).status().code() == StatusCode::kNotFound);

  Result<uint64_t> per_rank = ledger.BatchesPerRank("j");
  REQUIRE(per_rank.ok());
  REQUIRE(*per_rank == 469);
  for (uint64_t i = 0; i < 469; ++i) MustNext(ledger, "j", 0, 0);
  Result<BatchLease> extra = ledger.Next("j", 0, 0);
  CHECK(extra.status().code() == StatusCode::kFailedPrecondition);
  CHECK(extra.status().message() == "job 'j': rank 0 already received all 469 batches of epoch 0");
  // The other epoch is independent.
  CHECK(MustNext(ledger, "j", 0, 1).index_in_epoch == 0);
}

TEST_CASE("two ranks in any interleaving get their slice of every step, in step order") {
  const uint64_t kSamples = 1003;
  const JobParams params = Params(kSamples, 16, 2);
  std::mt19937 rng(12345);  // the interleaving only; the ledger must not depend on it
  std::vector<std::vector<uint64_t>> first_round;  // by epoch: ids in (rank, step) order
  for (int round = 0; round < 20; ++round) {
    JobLedger ledger;
    MustJoin(ledger, "j", 0, params);
    MustJoin(ledger, "j", 1, params);
    const uint64_t per_rank = *ledger.BatchesPerRank("j");
    REQUIRE(per_rank == 32);
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      const EpochPlan plan = MakeEpochPlan(kSamples, 16, 2, 7, epoch, true).value();
      std::vector<std::vector<uint64_t>> by_rank(2);
      std::vector<uint64_t> count(2, 0);
      while (count[0] < per_rank || count[1] < per_rank) {
        uint32_t rank = rng() % 2;
        if (count[rank] == per_rank) rank = 1 - rank;
        const BatchLease lease = MustNext(ledger, "j", rank, epoch);
        CHECK(lease.epoch == epoch);
        CHECK(lease.batch == count[rank]);
        CHECK(lease.index_in_epoch == count[rank]);
        CHECK(lease.last_in_epoch == (count[rank] + 1 == per_rank));
        CHECK(lease.step_end == plan.layout.step_starts[lease.batch + 1]);
        const PositionRange slice = plan.Slice(lease.batch, rank);
        CHECK(lease.sample_ids ==
              std::vector<uint64_t>(plan.ids(slice), plan.ids(slice) + slice.size()));
        ++count[rank];
        by_rank[rank].insert(by_rank[rank].end(), lease.sample_ids.begin(),
                             lease.sample_ids.end());
        if (rng() % 2 == 0) MustCommit(ledger, "j", rank, lease);
      }
      for (uint32_t rank = 0; rank < 2; ++rank) {
        CHECK(ledger.Next("j", rank, epoch).status().code() == StatusCode::kFailedPrecondition);
      }
      std::vector<uint64_t> ids = by_rank[0];
      ids.insert(ids.end(), by_rank[1].begin(), by_rank[1].end());
      if (round == 0) first_round.push_back(ids);
      CHECK(ids == first_round[epoch]);  // what each rank got never depends on timing
      CheckExactlyOnce(ids, kSamples);
    }
  }
}

TEST_CASE("a rank that leaves is handed its unconsumed batches again when it rejoins") {
  const uint64_t kSamples = 200;
  const JobParams params = Params(kSamples, 10, 2);  // 10 batches per rank
  JobLedger ledger;
  MustJoin(ledger, "j", 0, params);
  MustJoin(ledger, "j", 1, params);

  std::vector<uint64_t> ids;  // ids the trainers consumed
  std::vector<BatchLease> held;
  for (int i = 0; i < 6; ++i) held.push_back(MustNext(ledger, "j", 1, 0));
  // Consumed out of order: 0, 1, 2 and 4; 3 and 5 are still in the trainer's hands.
  for (int i : {0, 1, 2, 4}) {
    MustCommit(ledger, "j", 1, held[i]);
    ids.insert(ids.end(), held[i].sample_ids.begin(), held[i].sample_ids.end());
  }
  const BatchLease r0 = MustNext(ledger, "j", 0, 0);
  CHECK(r0.batch == 0);
  MustCommit(ledger, "j", 0, r0);
  ids.insert(ids.end(), r0.sample_ids.begin(), r0.sample_ids.end());

  ledger.Leave("j", 1);
  CHECK(ledger.Next("j", 1, 0).status().code() == StatusCode::kNotFound);
  // A late commit of a dropped lease is refused, so it cannot count twice.
  CHECK(ledger.Commit("j", 1, 0, 3).code() == StatusCode::kNotFound);
  MustJoin(ledger, "j", 1, params);

  // The restarted rank continues at its first unconsumed batch and skips what it consumed.
  std::vector<uint64_t> batches_1;
  for (;;) {
    Result<BatchLease> lease = ledger.Next("j", 1, 0);
    if (!lease.ok()) {
      CHECK(lease.status().code() == StatusCode::kFailedPrecondition);
      break;
    }
    CHECK(lease->last_in_epoch == (lease->batch == 9));
    batches_1.push_back(lease->batch);
    ids.insert(ids.end(), lease->sample_ids.begin(), lease->sample_ids.end());
  }
  CHECK(batches_1 == std::vector<uint64_t>{3, 5, 6, 7, 8, 9});

  for (uint64_t index = 1; index < 10; ++index) {
    const BatchLease lease = MustNext(ledger, "j", 0, 0);
    CHECK(lease.index_in_epoch == index);
    ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
  }
  CHECK(ledger.Next("j", 0, 0).status().code() == StatusCode::kFailedPrecondition);
  CheckExactlyOnce(ids, kSamples);
}

TEST_CASE("a job resumed mid-epoch on another world size serves exactly the rest") {
  const uint64_t kSamples = 1000;
  // The first run: 2 ranks x 16, consumes 7 steps of epoch 3 and checkpoints.
  JobParams first = Params(kSamples, 16, 2);
  first.start_epoch = 3;
  std::vector<uint64_t> ids;
  uint64_t position = 0;
  {
    JobLedger ledger;
    MustJoin(ledger, "j", 0, first);
    MustJoin(ledger, "j", 1, first);
    CHECK(ledger.Next("j", 0, 2).status().code() == StatusCode::kFailedPrecondition);
    for (int step = 0; step < 7; ++step)
      for (uint32_t r = 0; r < 2; ++r) {
        const BatchLease lease = MustNext(ledger, "j", r, 3);
        MustCommit(ledger, "j", r, lease);
        ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
        position = lease.step_end;
      }
  }
  CHECK(position == 7 * 32);
  // The second run: 3 ranks x 8 from that position.
  JobParams second = Params(kSamples, 8, 3);
  second.start_epoch = 3;
  second.start_position = position;
  JobLedger ledger;
  for (uint32_t r = 0; r < 3; ++r) MustJoin(ledger, "j", r, second);
  for (uint32_t r = 0; r < 3; ++r)
    for (;;) {
      Result<BatchLease> lease = ledger.Next("j", r, 3);
      if (!lease.ok()) break;
      ids.insert(ids.end(), lease->sample_ids.begin(), lease->sample_ids.end());
    }
  CheckExactlyOnce(ids, kSamples);
  // The next epoch is whole again.
  CHECK(MustNext(ledger, "j", 0, 4).sample_ids.size() == 8);
}

TEST_CASE("a resume from a checkpoint replaces a job nobody is joined to, not a live one") {
  JobLedger ledger;
  MustJoin(ledger, "j", 0, Params(100, 10, 2));
  JobParams resumed = Params(100, 10, 2);
  resumed.start_position = 40;
  Status live = ledger.Join("j", 1, resumed);
  CHECK(live.code() == StatusCode::kInvalidArgument);
  CHECK(live.message() == "start_position: job 'j' has 0, rank 1 asked for 40");
  ledger.Leave("j", 0);  // rank 1 never came: the job is kept, but nobody is joined
  MustJoin(ledger, "j", 1, resumed);
  CHECK(MustNext(ledger, "j", 1, 0).sample_ids.size() == 10);
  CHECK(*ledger.BatchesPerRank("j") == 5);
  // 60 positions left in steps of 20: rank 1's first batch is step 0 of the rest.
  const EpochPlan plan = MakeEpochPlan(100, 10, 2, 7, 0, true, 40).value();
  MustJoin(ledger, "j", 0, resumed);
  const BatchLease first = MustNext(ledger, "j", 0, 0);
  CHECK(first.step_end == 60);
  CHECK(first.sample_ids == std::vector<uint64_t>(plan.ids({40, 50}), plan.ids({40, 50}) + 10));
}

TEST_CASE("same-G topologies see the same samples in every global step") {
  // (world, batch) pairs with G = 48; the per-step sample sets must be identical.
  const uint64_t kSamples = 1111;
  std::vector<std::vector<std::set<uint64_t>>> runs;
  for (auto [world, batch] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 48}, {2, 24},
                                                                        {3, 16}, {4, 12}}) {
    JobLedger ledger;
    const JobParams params = Params(kSamples, batch, world, 3);
    for (uint32_t r = 0; r < world; ++r) MustJoin(ledger, "j", r, params);
    std::vector<std::set<uint64_t>> steps;
    for (uint32_t r = 0; r < world; ++r)
      for (;;) {
        Result<BatchLease> lease = ledger.Next("j", r, 1);
        if (!lease.ok()) break;
        if (steps.size() <= lease->batch) steps.resize(lease->batch + 1);
        steps[lease->batch].insert(lease->sample_ids.begin(), lease->sample_ids.end());
      }
    runs.push_back(steps);
  }
  for (size_t i = 1; i < runs.size(); ++i) CHECK(runs[i] == runs[0]);
}

TEST_CASE("a rank that leaves mid-epoch in a random interleaving still yields each sample once") {
  const uint64_t kSamples = 517;
  const JobParams params = Params(kSamples, 8, 3);
  std::mt19937 rng(777);
  for (int round = 0; round < 30; ++round) {
    JobLedger ledger;
    for (uint32_t r = 0; r < 3; ++r) MustJoin(ledger, "j", r, params);
    std::vector<std::vector<BatchLease>> pending(3);  // leased, not yet consumed
    std::vector<uint64_t> consumed;
    std::vector<bool> done(3, false);
    bool crashed = false;
    while (!(done[0] && done[1] && done[2])) {
      const uint32_t rank = rng() % 3;
      if (done[rank]) continue;
      const int action = rng() % 10;
      if (action < 5) {
        Result<BatchLease> lease = ledger.Next("j", rank, 0);
        if (lease.ok()) {
          pending[rank].push_back(std::move(lease).value());
        } else {
          REQUIRE(lease.status().code() == StatusCode::kFailedPrecondition);
          if (pending[rank].empty()) done[rank] = true;
        }
      } else if (action < 9) {
        if (pending[rank].empty()) continue;
        const BatchLease lease = pending[rank].front();
        pending[rank].erase(pending[rank].begin());
        MustCommit(ledger, "j", rank, lease);
        consumed.insert(consumed.end(), lease.sample_ids.begin(), lease.sample_ids.end());
      } else if (!crashed) {
        crashed = true;  // the trainer dies: its pending batches are never consumed
        ledger.Leave("j", rank);
        pending[rank].clear();
        MustJoin(ledger, "j", rank, params);
      }
    }
    CheckExactlyOnce(consumed, kSamples);
    CHECK(crashed);
  }
}

TEST_CASE("one thread per rank hammering Next gets a consistent split") {
  const uint64_t kSamples = 20000;
  const uint32_t kWorld = 4;
  const JobParams params = Params(kSamples, 4, kWorld);
  JobLedger ledger;
  for (uint32_t r = 0; r < kWorld; ++r) MustJoin(ledger, "j", r, params);
  const uint64_t per_rank = *ledger.BatchesPerRank("j");
  REQUIRE(per_rank == 1250);
  const uint64_t kEpochs = 3;

  std::vector<std::vector<BatchLease>> got(kWorld);
  std::vector<int> errors(kWorld, 0);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      for (uint64_t epoch = 0; epoch < kEpochs; ++epoch) {
        for (;;) {
          Result<BatchLease> lease = ledger.Next("j", r, epoch);
          if (!lease.ok()) {
            if (lease.status().code() != StatusCode::kFailedPrecondition) ++errors[r];
            break;
          }
          if (!ledger.Commit("j", r, epoch, lease->batch).ok()) ++errors[r];
          got[r].push_back(std::move(lease).value());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  for (uint64_t epoch = 0; epoch < kEpochs; ++epoch) {
    std::vector<uint64_t> ids;
    for (uint32_t r = 0; r < kWorld; ++r) {
      CHECK(errors[r] == 0);
      uint64_t index = 0;
      for (const BatchLease& lease : got[r]) {
        if (lease.epoch != epoch) continue;
        CHECK(lease.batch == index);
        CHECK(lease.last_in_epoch == (index + 1 == per_rank));
        ++index;
        ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
      }
      CHECK(index == per_rank);
    }
    CheckExactlyOnce(ids, kSamples);
  }
  const JobSummary* s = FindSummary(ledger.Summaries(), "j");
  REQUIRE(s != nullptr);
  CHECK(s->batches_leased == kEpochs * kWorld * per_rank);
  CHECK(s->batches_committed == kEpochs * kWorld * per_rank);
}

TEST_CASE("Summaries list at most kMaxRanksListed ranks a job and build only the jobs asked for") {
  JobLedger ledger;
  JobParams wide = Params(100000, 1, 5000);
  wide.owner.uid = 2002;
  for (uint32_t rank : {0u, 3u, 4999u}) MustJoin(ledger, "wide", rank, wide);
  JobParams other = Params(100, 10, 2);
  other.owner.uid = 2001;
  MustJoin(ledger, "other", 0, other);
  const JobSummary* s = FindSummary(ledger.Summaries(), "wide");
  REQUIRE(s != nullptr);
  CHECK(s->ranks.size() == kMaxRanksListed);
  CHECK(s->ranks.back().rank == kMaxRanksListed - 1);
  CHECK(s->ranks_unlisted == 5000 - kMaxRanksListed);
  CHECK(s->ranks_joined == 3);  // rank 4999 counts, unlisted
  const std::vector<JobSummary> bobs =
      ledger.Summaries([](const Principal& owner) { return owner.uid == 2002; });
  REQUIRE(bobs.size() == 1);
  CHECK(bobs[0].job == "wide");
}

TEST_CASE("Commit is idempotent and checks the lease") {
  JobLedger ledger;
  MustJoin(ledger, "j", 0, Params(100, 10, 2));
  MustJoin(ledger, "j", 1, Params(100, 10, 2));
  const BatchLease lease = MustNext(ledger, "j", 0, 0);
  MustCommit(ledger, "j", 0, lease);
  MustCommit(ledger, "j", 0, lease);
  const JobSummary* s = FindSummary(ledger.Summaries(), "j");
  REQUIRE(s != nullptr);
  CHECK(s->batches_committed == 1);

  CHECK(ledger.Commit("j", 1, 0, lease.batch).code() == StatusCode::kNotFound);  // not rank 1's
  CHECK(ledger.Commit("j", 0, 0, 4).code() == StatusCode::kNotFound);            // never leased
  CHECK(ledger.Commit("j", 0, 9, 0).code() == StatusCode::kNotFound);            // no such epoch
  CHECK(ledger.Commit("nope", 0, 0, 0).code() == StatusCode::kNotFound);
}

// Records what the ledger reports, one line per report.
class RecordingObserver final : public LedgerObserver {
 public:
  void JobCreated(const std::string& job, const JobParams&) override {
    reports.push_back("created " + job);
  }
  void BatchCommitted(const std::string& job, uint64_t epoch, uint64_t batch,
                      const std::vector<uint32_t>& ranks) override {
    std::string line = "committed " + job + " " + std::to_string(epoch) + "/" +
                       std::to_string(batch) + " ranks";
    for (uint32_t r : ranks) line += " " + std::to_string(r);
    reports.push_back(line);
  }
  void JobForgotten(const std::string& job) override { reports.push_back("forgotten " + job); }
  std::vector<std::string> reports;
};

TEST_CASE("batched Next and Commit for a node's ranks match the one-rank calls") {
  const JobParams p = Params(960, 4, 8);
  JobLedger single, batched;
  RecordingObserver observer;
  batched.SetObserver(&observer);
  for (uint32_t r = 0; r < 8; ++r) {
    MustJoin(single, "j", r, p);
    if (r != 6) MustJoin(batched, "j", r, p);  // rank 6 is not joined to `batched`
  }
  observer.reports.clear();
  // A node speaking for ranks 4..7 (6 not joined), plus a rank out of range.
  const std::vector<RankWant> wants = {{4, 0}, {5, 0}, {6, 0}, {7, 0}, {9, 0}};
  std::vector<Result<BatchLease>> leases = batched.Next("j", wants);
  REQUIRE(leases.size() == wants.size());
  for (size_t i = 0; i < wants.size(); ++i) {
    INFO("rank " << wants[i].rank);
    if (wants[i].rank == 6 || wants[i].rank == 9) {
      CHECK(leases[i].status().code() == StatusCode::kNotFound);
      continue;
    }
    REQUIRE(leases[i].ok());
    const BatchLease expected = MustNext(single, "j", wants[i].rank, 0);
    CHECK(leases[i]->batch == expected.batch);
    CHECK(leases[i]->step_end == expected.step_end);
    CHECK(leases[i]->positions.begin == expected.positions.begin);
    CHECK(leases[i]->positions.end == expected.positions.end);
    CHECK(leases[i]->sample_ids.empty());  // the node computes them from the positions
    EpochOrders orders;
    CHECK(orders.Ids({p.num_samples, p.seed, p.shuffle, {}}, 0, leases[i]->positions) ==
          expected.sample_ids);
  }
  // A second want of rank 4 in one call gets its next step.
  std::vector<Result<BatchLease>> more = batched.Next("j", {{4, 0}, {4, 0}});
  REQUIRE(more[0].ok());
  REQUIRE(more[1].ok());
  CHECK(more[0]->batch == 1);
  CHECK(more[1]->batch == 2);

  std::vector<Status> commits = batched.Commit(
      "j", {{7, 0, 0}, {4, 0, 0}, {5, 0, 0}, {4, 0, 2}, {4, 0, 0}, {5, 0, 1}});
  REQUIRE(commits.size() == 6);
  CHECK(commits[0].ok());
  CHECK(commits[1].ok());
  CHECK(commits[2].ok());
  CHECK(commits[3].ok());
  CHECK(commits[4].ok());  // again: idempotent, not reported twice
  CHECK(commits[5].code() == StatusCode::kNotFound);  // rank 5 holds no lease of batch 1
  // One report per batch, its ranks in order.
  CHECK(observer.reports ==
        std::vector<std::string>{"committed j 0/0 ranks 4 5 7", "committed j 0/2 ranks 4"});
  CHECK(batched.Next("nope", {{0, 0}})[0].status().code() == StatusCode::kNotFound);
  CHECK(batched.Commit("nope", {{0, 0, 0}})[0].code() == StatusCode::kNotFound);
  batched.SetObserver(nullptr);
}

TEST_CASE("a job that never fills expires; its ranks are told why; the name can start again") {
  JobLedger ledger;
  RecordingObserver observer;
  ledger.SetObserver(&observer);
  const JobParams p = Params(100, 10, 3);
  MustJoin(ledger, "lonely", 0, p);
  MustJoin(ledger, "full", 0, Params(100, 10, 1));
  const BatchLease lease = MustNext(ledger, "lonely", 0, 0);
  constexpr uint64_t kSecond = 1000000;
  CHECK(ledger.ExpireUnfilled(5 * kSecond, 60 * kSecond).empty());   // first seen unfilled
  CHECK(ledger.ExpireUnfilled(64 * kSecond, 60 * kSecond).empty());  // 59 s later
  const std::vector<std::string> expired = ledger.ExpireUnfilled(65 * kSecond, 60 * kSecond);
  REQUIRE(expired.size() == 1);  // "full" has all of its one rank
  const std::string message = "job 'lonely' expired: ranks 1, 2 of 3 did not join within 60 s";
  CHECK(expired[0] == message);
  CHECK(observer.reports.back() == "forgotten lonely");
  Result<BatchLease> next = ledger.Next("lonely", 0, 0);
  CHECK(next.status().code() == StatusCode::kFailedPrecondition);
  CHECK(next.status().message() == message);
  CHECK(ledger.Commit("lonely", 0, 0, lease.batch).message() == message);
  CHECK(ledger.Next("never", 0, 0).status().code() == StatusCode::kNotFound);
  // A new job of the name starts afresh.
  MustJoin(ledger, "lonely", 1, p);
  CHECK(MustNext(ledger, "lonely", 1, 0).batch == 0);
  // Once every rank has joined, it no longer expires, even after they leave again.
  MustJoin(ledger, "lonely", 0, p);
  MustJoin(ledger, "lonely", 2, p);
  ledger.Leave("lonely", 2);
  CHECK(ledger.ExpireUnfilled(1000 * kSecond, 60 * kSecond).empty());
  CHECK(ledger.ExpireUnfilled(2000 * kSecond, 60 * kSecond).empty());
  CHECK(FindSummary(ledger.Summaries(), "lonely") != nullptr);
  ledger.SetObserver(nullptr);
}

TEST_CASE("a replayed job nobody comes back to expires as well") {
  JobLedger ledger;
  REQUIRE(ledger.ReplayJob("old", Params(100, 10, 2)).ok());
  CHECK(ledger.ExpireUnfilled(1, 10).empty());
  const std::vector<std::string> expired = ledger.ExpireUnfilled(11, 10);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0] == "job 'old' expired: ranks 0, 1 of 2 did not join within 0 s");
  CHECK(ledger.Summaries().empty());
}

TEST_CASE("Summaries count epochs, leases and commits per job") {
  JobLedger ledger;
  CHECK(ledger.Summaries().empty());
  MustJoin(ledger, "a", 0, Params(100, 10, 1));
  MustJoin(ledger, "b", 0, Params(50, 5, 2));

  for (int i = 0; i < 4; ++i) {
    const BatchLease lease = MustNext(ledger, "a", 0, 0);
    if (i % 2 == 0) MustCommit(ledger, "a", 0, lease);
  }
  MustNext(ledger, "a", 0, 1);
  MustNext(ledger, "a", 0, 5);

  const std::vector<JobSummary> summaries = ledger.Summaries();
  REQUIRE(summaries.size() == 2);
  const JobSummary* a = FindSummary(summaries, "a");
  const JobSummary* b = FindSummary(summaries, "b");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->params.num_samples == 100);
  CHECK(a->epochs_started == 3);
  CHECK(a->batches_leased == 6);
  CHECK(a->batches_committed == 2);
  CHECK(b->params.world_size == 2);
  CHECK(b->epochs_started == 0);
  CHECK(b->batches_leased == 0);
  // Rank 0 of "a" consumed batches 0 and 2 of epoch 0 (1 and 3 are out): one in a row.
  REQUIRE(a->ranks.size() == 1);
  CHECK(a->ranks[0].joined);
  CHECK(a->ranks[0].epoch == 0);
  CHECK(a->ranks[0].consumed == 1);
  CHECK(a->ranks[0].leased == 2);
  // In flight over every epoch: batches 1 and 3 of epoch 0, and one of epochs 1 and 5.
  CHECK(a->leases_in_flight == 4);
  CHECK(b->leases_in_flight == 0);
  CHECK(a->batches_per_rank == 10);
  REQUIRE(b->ranks.size() == 2);
  CHECK(!b->ranks[1].joined);
}

TEST_CASE("a job is forgotten once every rank has joined and all have left") {
  JobLedger ledger;
  MustJoin(ledger, "j", 0, Params(100, 10, 2));
  MustJoin(ledger, "j", 1, Params(100, 10, 2));
  ledger.Leave("j", 0);
  ledger.Leave("j", 0);  // idempotent
  CHECK(ledger.BatchesPerRank("j").ok());
  CHECK(ledger.Join("j", 0, Params(100, 20, 2)).code() == StatusCode::kInvalidArgument);
  ledger.Leave("j", 1);
  CHECK(ledger.BatchesPerRank("j").status().code() == StatusCode::kNotFound);
  CHECK(ledger.Summaries().empty());
  ledger.Leave("j", 1);
  ledger.Leave("never", 0);

  MustJoin(ledger, "j", 0, Params(100, 20, 2));
  Result<uint64_t> per_rank = ledger.BatchesPerRank("j");
  REQUIRE(per_rank.ok());
  CHECK(*per_rank == 3);
}

TEST_CASE("a rank that finishes before the next one joins does not reset the job") {
  JobLedger ledger;
  MustJoin(ledger, "j", 0, Params(100, 10, 2));
  std::set<uint64_t> seen;
  for (int i = 0; i < 5; ++i) {
    BatchLease lease = MustNext(ledger, "j", 0, 0);
    seen.insert(lease.sample_ids.begin(), lease.sample_ids.end());
    MustCommit(ledger, "j", 0, lease);
  }
  ledger.Leave("j", 0);
  // Rank 1 was never there: the job (and rank 0's progress) must still exist.
  REQUIRE(ledger.BatchesPerRank("j").ok());
  MustJoin(ledger, "j", 1, Params(100, 10, 2));
  for (int i = 0; i < 5; ++i) {
    BatchLease lease = MustNext(ledger, "j", 1, 0);
    seen.insert(lease.sample_ids.begin(), lease.sample_ids.end());
    MustCommit(ledger, "j", 1, lease);
  }
  CHECK(seen.size() == 100);
  ledger.Leave("j", 1);
  CHECK(ledger.Summaries().empty());
}

TEST_CASE("a finished epoch's plan is dropped, and the epoch stays finished") {
  const JobParams params = Params(100, 10, 2);
  JobLedger ledger;
  MustJoin(ledger, "j", 0, params);
  MustJoin(ledger, "j", 1, params);

  auto run_epoch = [&](uint64_t epoch) {
    for (uint32_t r = 0; r < 2; ++r) {
      for (int i = 0; i < 5; ++i) MustCommit(ledger, "j", r, MustNext(ledger, "j", r, epoch));
    }
  };
  for (uint64_t epoch = 0; epoch < 50; ++epoch) {
    run_epoch(epoch);
    CHECK(JobLedgerTestPeer::InFlightEpochs(ledger, "j") == 0);
  }

  // Leased but not fully committed: kept.
  const BatchLease open = MustNext(ledger, "j", 0, 50);
  CHECK(JobLedgerTestPeer::InFlightEpochs(ledger, "j") == 1);
  // An epoch out of order finishes and is dropped too.
  run_epoch(52);
  CHECK(JobLedgerTestPeer::InFlightEpochs(ledger, "j") == 1);
  CHECK(JobLedgerTestPeer::FinishedEpochsRecorded(ledger, "j") == 1);  // 52 above the watermark 50

  // Finished epochs refuse further leases and accept repeated commits.
  for (uint64_t epoch : {uint64_t{0}, uint64_t{49}, uint64_t{52}}) {
    INFO("epoch " << epoch);
    Result<BatchLease> again = ledger.Next("j", 1, epoch);
    CHECK(again.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(again.status().message(), Catch::Contains("all 5 batches of epoch"));
    CHECK(ledger.Commit("j", 1, epoch, 0).ok());
  }

  // Every rank must have committed everything before the plan goes.
  for (int i = 1; i < 5; ++i) MustCommit(ledger, "j", 0, MustNext(ledger, "j", 0, 50));
  std::vector<BatchLease> rank1;
  for (int i = 0; i < 5; ++i) rank1.push_back(MustNext(ledger, "j", 1, 50));
  for (const BatchLease& lease : rank1) MustCommit(ledger, "j", 1, lease);
  CHECK(JobLedgerTestPeer::InFlightEpochs(ledger, "j") == 1);  // `open` is not committed yet
  MustCommit(ledger, "j", 0, open);
  CHECK(JobLedgerTestPeer::InFlightEpochs(ledger, "j") == 0);
  run_epoch(51);
  CHECK(JobLedgerTestPeer::FinishedEpochsRecorded(ledger, "j") == 0);  // watermark moved past 52
  CHECK(ledger.Next("j", 0, 52).status().code() == StatusCode::kFailedPrecondition);
  CHECK(MustNext(ledger, "j", 0, 53).index_in_epoch == 0);

  const JobSummary* s = FindSummary(ledger.Summaries(), "j");
  REQUIRE(s != nullptr);
  CHECK(s->epochs_started == 54);
  CHECK(s->batches_committed == 53 * 10);
}

TEST_CASE("a rank resuming with what its node holds continues where the node stands") {
  const JobParams params = Params(200, 10, 2);  // 10 batches per rank
  std::vector<uint64_t> ids;
  JobLedger before;
  MustJoin(before, "j", 0, params);
  std::vector<BatchLease> leases;
  for (int i = 0; i < 6; ++i) leases.push_back(MustNext(before, "j", 0, 0));
  for (int i : {0, 1}) MustCommit(before, "j", 0, leases[i]);
  // The coordinator restarts having journaled commits 0 and 1 only (a replay would restore
  // them); the node consumed 2 and 4 too and still holds 3 and 5.
  JobLedger after;
  MustJoin(after, "j", 0, params);
  REQUIRE(after.Resume("j", 0, {{0, 0, true}, {0, 1, true}, {0, 2, true}, {0, 3, false},
                                {0, 4, true}, {0, 5, false}})
              .ok());
  for (int i : {0, 1, 2, 4}) ids.insert(ids.end(), leases[i].sample_ids.begin(), leases[i].sample_ids.end());
  // The held leases are the rank's: committing them works, and Next skips them.
  MustCommit(after, "j", 0, leases[3]);
  ids.insert(ids.end(), leases[3].sample_ids.begin(), leases[3].sample_ids.end());
  std::vector<uint64_t> next;
  for (;;) {
    Result<BatchLease> lease = after.Next("j", 0, 0);
    if (!lease.ok()) break;
    next.push_back(lease->batch);
  }
  CHECK(next == std::vector<uint64_t>{6, 7, 8, 9});
  const JobSummary* s = FindSummary(after.Summaries(), "j");
  REQUIRE(s != nullptr);
  CHECK(s->ranks[0].consumed == 5);
  CHECK(after.Resume("j", 1, {}).code() == StatusCode::kNotFound);
  CHECK(after.Resume("j", 0, {{0, 10, true}}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a job shuffled by shards: leases follow the blocks; a rank that knows them brings them") {
  JobLedger ledger;
  JobParams p = Params(100, 5, 2);
  p.shuffle_shape = ShuffleShape::ByShards({0, 10, 35, 50, 80, 100}, 2);
  // Created by another node's rank: the wire carries the digest, not the blocks.
  JobParams remote = p;
  remote.shuffle_shape.starts = nullptr;
  MustJoin(ledger, "j", 1, remote);
  JobParams other = p;
  other.shuffle_shape = ShuffleShape::ByShards({0, 50, 100}, 2);
  const Status differs = ledger.Join("j", 0, other);
  CHECK(differs.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(differs.message(), Catch::Contains("shuffle shards"));
  MustJoin(ledger, "j", 0, p);  // this node's rank: its dataset's blocks
  Result<EpochPlan> plan = MakeEpochPlan(100, 5, 2, p.seed, 0, true, 0, p.shuffle_shape);
  REQUIRE(plan.ok());
  for (int i = 0; i < 3; ++i) {
    const BatchLease lease = MustNext(ledger, "j", 0, 0);
    CHECK(lease.step_begin == plan->layout.step_starts[lease.batch]);
    CHECK(lease.sample_ids == plan->RankIds(lease.batch, 0, p.shuffle_shape));
  }
}

}  // namespace
}  // namespace ember::daemon
