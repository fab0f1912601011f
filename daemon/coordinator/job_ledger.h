// JobLedger: the coordinator's record of which batches of which epoch went to which rank.
//
// Glossary
//   job     one training run: world_size ranks reading one dataset with one
//           (batch_size, seed, shuffle). Ranks join by name; the first sets the params.
//   lease   a batch handed to a rank's stream, not yet consumed (a BatchLease). Not a
//           ring slot: the stream writes a leased batch into a slot, the trainer holds
//           the slot while it reads and hands it back.
//   commit  the rank's trainer consumed the batch: the stream calls Commit once it sees
//           the batch's slot handed back.
//
// Batches of an epoch are leased on demand, in plan order, to whichever rank asks next,
// so a slow rank never holds up loading; each rank gets exactly batches_per_rank of them
// per epoch. When a rank leaves (its stream closed or its trainer died), its uncommitted
// leases go back to the pool, and its lease count drops by as many, so a restarted rank
// picks them up again: each sample is still delivered exactly once per epoch.
// A job is forgotten once every rank of its world has joined and all have left, so a rank
// that finishes (or crashes) before another rank joins does not reset the job.
//
// Thread-safety: all methods are safe to call concurrently (one mutex).
#ifndef EMBER_DAEMON_COORDINATOR_JOB_LEDGER_H_
#define EMBER_DAEMON_COORDINATOR_JOB_LEDGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "daemon/coordinator/epoch_plan.h"
#include "ember/status.h"

namespace ember::daemon {

struct JobParams {
  std::string dataset;
  uint64_t num_samples = 0;
  uint32_t batch_size = 0;
  uint32_t world_size = 0;
  uint64_t seed = 0;
  bool shuffle = true;
};

struct BatchLease {
  uint64_t epoch = 0;
  uint64_t batch = 0;           // index into the epoch's plan
  uint64_t index_in_epoch = 0;  // this rank's count: 0 .. batches_per_rank-1
  bool last_in_epoch = false;   // this rank's final batch of the epoch
  std::vector<uint64_t> sample_ids;
};

struct JobSummary {
  std::string job;
  JobParams params;
  uint64_t epochs_started = 0;
  uint64_t batches_leased = 0;     // over the job's life
  uint64_t batches_committed = 0;  // over the job's life
};

class JobLedger {
 public:
  // Registers `rank` of job `job`. The first rank creates the job; later ranks must
  // match its params (kInvalidArgument naming the mismatched field and both values).
  // kAlreadyExists if that rank is already joined; kInvalidArgument if rank >= world_size
  // or the plan is impossible (see MakeEpochPlan).
  Status Join(const std::string& job, uint32_t rank, const JobParams& params);

  // The next batch of `epoch` for `rank`, in plan order (batches given back by a leaving
  // rank first). kFailedPrecondition if the rank already received all its batches of
  // that epoch ("rank 1 already received all 469 batches of epoch 0"); kNotFound if the
  // job does not exist or the rank is not joined.
  Result<BatchLease> Next(const std::string& job, uint32_t rank, uint64_t epoch);

  // Marks a lease consumed. Idempotent (also once the epoch is finished and dropped).
  // kNotFound if the job does not exist or `rank` holds no lease of that batch (e.g. it
  // left, and the batch went back to the pool).
  Status Commit(const std::string& job, uint32_t rank, uint64_t epoch, uint64_t batch);

  // The rank leaves: uncommitted leases return to the pool. Forgets the job when no rank
  // is left. Idempotent.
  void Leave(const std::string& job, uint32_t rank);

  Result<uint64_t> BatchesPerRank(const std::string& job) const;
  std::vector<JobSummary> Summaries() const;

 private:
  // An epoch's state lives from its first lease until every batch is committed; then it
  // is dropped and the epoch only recorded as finished, so memory stays bounded by the
  // epochs in flight.
  struct EpochState {
    EpochPlan plan;
    uint64_t next_fresh = 0;                 // first never-leased batch
    std::set<uint64_t> returned;             // batches given back by a leaving rank
    std::map<uint32_t, uint64_t> leased_by_rank;  // leases counted against the quota
    std::map<std::pair<uint32_t, uint64_t>, bool> outstanding;  // (rank, batch) -> committed
    uint64_t committed = 0;                  // entries of `outstanding` that are committed
  };
  struct JobState {
    JobParams params;
    uint64_t batches_per_rank = 0;
    std::vector<bool> joined;       // by rank: joined now
    std::vector<bool> ever_joined;  // by rank: joined at some point
    std::map<uint64_t, EpochState> epochs;  // epochs in flight
    uint64_t finished_below = 0;            // every epoch < this is finished
    std::set<uint64_t> finished_above;      // finished epochs > finished_below
    uint64_t epochs_started = 0;
    uint64_t batches_leased = 0;
    uint64_t batches_committed = 0;

    bool IsFinished(uint64_t epoch) const {
      return epoch < finished_below || finished_above.count(epoch) > 0;
    }
    void MarkFinished(uint64_t epoch);
  };

  friend class JobLedgerTestPeer;  // job_ledger_test.cc: checks that memory stays bounded

  mutable std::mutex mu_;
  std::map<std::string, JobState> jobs_;  // guarded by mu_
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_JOB_LEDGER_H_
