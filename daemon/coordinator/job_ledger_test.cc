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
    std::lock_guard<std::mutex> lock(ledger.mu_);
    return ledger.jobs_.at(job).epochs.size();
  }
  // Finished epochs remembered one by one (those above the contiguous watermark).
  static size_t FinishedEpochsRecorded(const JobLedger& ledger, const std::string& job) {
    std::lock_guard<std::mutex> lock(ledger.mu_);
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

TEST_CASE("two ranks in any interleaving split each epoch exactly") {
  const uint64_t kSamples = 1003;
  const JobParams params = Params(kSamples, 16, 2);
  std::mt19937 rng(12345);  // the interleaving only; the ledger must not depend on it
  for (int round = 0; round < 20; ++round) {
    JobLedger ledger;
    MustJoin(ledger, "j", 0, params);
    MustJoin(ledger, "j", 1, params);
    const uint64_t per_rank = *ledger.BatchesPerRank("j");
    REQUIRE(per_rank == 32);
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      std::vector<uint64_t> ids;
      std::vector<uint64_t> count(2, 0);
      std::vector<uint64_t> batches;
      while (count[0] < per_rank || count[1] < per_rank) {
        uint32_t rank = rng() % 2;
        if (count[rank] == per_rank) rank = 1 - rank;
        const BatchLease lease = MustNext(ledger, "j", rank, epoch);
        CHECK(lease.epoch == epoch);
        CHECK(lease.index_in_epoch == count[rank]);
        CHECK(lease.last_in_epoch == (count[rank] + 1 == per_rank));
        ++count[rank];
        ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
        batches.push_back(lease.batch);
        if (rng() % 2 == 0) MustCommit(ledger, "j", rank, lease);
      }
      // Batches go out in plan order, whoever asks.
      CHECK(batches == Iota(2 * per_rank));
      for (uint32_t rank = 0; rank < 2; ++rank) {
        CHECK(ledger.Next("j", rank, epoch).status().code() == StatusCode::kFailedPrecondition);
      }
      CheckExactlyOnce(ids, kSamples);
    }
  }
}

TEST_CASE("the sample ids of a lease are the plan's batch") {
  JobLedger ledger;
  const JobParams params = Params(100, 8, 2, 99);
  MustJoin(ledger, "j", 0, params);
  Result<EpochPlan> plan = MakeEpochPlan(100, 8, 2, 99, 3, true);
  REQUIRE(plan.ok());
  for (uint64_t i = 0; i < plan->batches_per_rank; ++i) {
    const BatchLease lease = MustNext(ledger, "j", 0, 3);
    const uint64_t* ids = plan->batch_ids(lease.batch);
    CHECK(lease.sample_ids == std::vector<uint64_t>(ids, ids + plan->batch_size(lease.batch)));
  }
}

TEST_CASE("a rank that leaves gives its uncommitted leases back") {
  const uint64_t kSamples = 200;
  const JobParams params = Params(kSamples, 10, 2);  // 10 batches per rank
  JobLedger ledger;
  MustJoin(ledger, "j", 0, params);
  MustJoin(ledger, "j", 1, params);

  std::vector<uint64_t> ids;  // ids the trainers consumed
  std::vector<uint64_t> committed_by_1;
  for (int i = 0; i < 6; ++i) {
    const BatchLease lease = MustNext(ledger, "j", 1, 0);
    if (i < 3) {
      MustCommit(ledger, "j", 1, lease);
      committed_by_1.push_back(lease.batch);
      ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
    }
  }
  const BatchLease r0 = MustNext(ledger, "j", 0, 0);  // batch 6
  CHECK(r0.batch == 6);
  MustCommit(ledger, "j", 0, r0);
  ids.insert(ids.end(), r0.sample_ids.begin(), r0.sample_ids.end());

  ledger.Leave("j", 1);  // batches 3, 4, 5 were leased but not consumed
  CHECK(ledger.Next("j", 1, 0).status().code() == StatusCode::kNotFound);
  // A late commit of a returned lease is refused, so it cannot count twice.
  CHECK(ledger.Commit("j", 1, 0, 4).code() == StatusCode::kNotFound);
  MustJoin(ledger, "j", 1, params);

  // The restarted rank continues its count where its commits left off and gets the
  // returned batches first, in plan order.
  std::vector<uint64_t> batches_1;
  for (uint64_t index = 3; index < 10; ++index) {
    const BatchLease lease = MustNext(ledger, "j", 1, 0);
    CHECK(lease.index_in_epoch == index);
    CHECK(lease.last_in_epoch == (index == 9));
    batches_1.push_back(lease.batch);
    ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
  }
  CHECK(batches_1 == std::vector<uint64_t>{3, 4, 5, 7, 8, 9, 10});
  for (uint64_t b : committed_by_1) {
    CHECK(std::find(batches_1.begin(), batches_1.end(), b) == batches_1.end());
  }
  CHECK(ledger.Next("j", 1, 0).status().code() == StatusCode::kFailedPrecondition);

  for (uint64_t index = 1; index < 10; ++index) {
    const BatchLease lease = MustNext(ledger, "j", 0, 0);
    CHECK(lease.index_in_epoch == index);
    ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
  }
  CHECK(ledger.Next("j", 0, 0).status().code() == StatusCode::kFailedPrecondition);
  CheckExactlyOnce(ids, kSamples);
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
    std::vector<uint64_t> batches;
    for (uint32_t r = 0; r < kWorld; ++r) {
      CHECK(errors[r] == 0);
      uint64_t index = 0;
      for (const BatchLease& lease : got[r]) {
        if (lease.epoch != epoch) continue;
        CHECK(lease.index_in_epoch == index);
        CHECK(lease.last_in_epoch == (index + 1 == per_rank));
        ++index;
        batches.push_back(lease.batch);
        ids.insert(ids.end(), lease.sample_ids.begin(), lease.sample_ids.end());
      }
      CHECK(index == per_rank);
    }
    std::sort(batches.begin(), batches.end());
    CHECK(batches == Iota(kWorld * per_rank));
    CheckExactlyOnce(ids, kSamples);
  }
  const JobSummary* s = FindSummary(ledger.Summaries(), "j");
  REQUIRE(s != nullptr);
  CHECK(s->batches_leased == kEpochs * kWorld * per_rank);
  CHECK(s->batches_committed == kEpochs * kWorld * per_rank);
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

}  // namespace
}  // namespace ember::daemon
