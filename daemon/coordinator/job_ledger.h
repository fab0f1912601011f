// JobLedger: the coordinator's record of which batches of which epoch each rank of a job
// was handed and has consumed.
//
// Glossary
//   job     one training run: world_size ranks reading one dataset with one
//           (batch_size, seed, shuffle, start). Ranks join by name; the first sets the params.
//   step    a global step of an epoch's plan (epoch_plan.h): G = batch_size x world_size
//           positions of the epoch's order; rank r's batch of step s is slice r of it. So
//           which samples a rank gets is fixed by (seed, epoch, rank), never by timing.
//   lease   a batch handed to a rank's stream, not yet consumed (a BatchLease). Not a
//           ring slot: the stream writes a leased batch into a slot, the trainer holds
//           the slot while it reads and hands it back.
//   commit  the rank's trainer consumed the batch: the stream calls Commit once it sees
//           the batch's slot handed back.
//
// Each rank is handed its batches of an epoch in step order, as its stream asks for them,
// so a slow rank never holds up another rank's loading. When a rank leaves (its stream
// closed or its trainer died), its uncommitted leases are dropped; when it joins again it
// continues at its first unconsumed batch, so each sample is delivered exactly once per
// epoch. A job resumed from a checkpoint starts at (start_epoch, start_position): the
// positions of start_epoch's order before start_position were consumed by an earlier run,
// possibly with another world size or batch size.
// A job is forgotten once every rank of its world has joined and all have left, so a rank
// that finishes (or crashes) before another rank joins does not reset the job. A job that
// never fills (some rank never joins, e.g. a failed launch; or a replayed job nobody comes
// back to) is expired by ExpireUnfilled; its remaining ranks' calls then fail with
// kFailedPrecondition saying so.
//
// Durability: the ledger itself is in memory. It reports each change of its durable state
// (a job created, a batch consumed, a job forgotten; never leases) to a LedgerObserver,
// which journals it (ledger_journal.h); at startup the journal's records are replayed
// through the Replay* calls. A replayed job has no rank joined, and none that ever
// joined, so it lasts until every rank has joined again and all have left.
//
// Thread-safety: all methods are safe to call concurrently (one mutex).
#ifndef EMBER_DAEMON_COORDINATOR_JOB_LEDGER_H_
#define EMBER_DAEMON_COORDINATOR_JOB_LEDGER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "daemon/coordinator/epoch_orders.h"
#include "daemon/coordinator/epoch_plan.h"
#include "daemon/coordinator/job_coordinator.h"
#include "daemon/coordinator/job_name.h"
#include "ember/daemon_status.h"
#include "ember/status.h"

namespace ember::daemon {

// Where one rank of a job stands: the wire's own struct (ember/daemon_status.h).
using ::ember::RankProgress;

// A job as the ledger (or a RemoteCoordinator) knows it; DaemonService::GetStatus makes
// the wire's JobStatus of it.
// Which jobs a summary covers, by their owner (a caller's view: what it may see).
using OwnerFilter = std::function<bool(const Principal& owner)>;

struct JobSummary {
  std::string job;
  JobParams params;
  uint64_t epochs_started = 0;
  uint64_t batches_leased = 0;     // over the job's life
  uint64_t batches_committed = 0;  // over the job's life
  uint64_t batches_per_rank = 0;   // in a full epoch
  uint64_t leases_in_flight = 0;   // leased, not yet consumed: all ranks, every epoch
  std::vector<RankProgress> ranks;  // at most kMaxRanksListed, by rank
  uint32_t ranks_unlisted = 0;      // ranks beyond those listed
  uint32_t ranks_joined = 0;        // listed or not
  // Empty: this daemon's ledger coordinates the job. Else the HOST:PORT of the daemon that
  // does, and `ranks` holds only this node's ranks, as far as its proxy knows them.
  std::string coordinator;
};

// The durable state of one job: its params and what its ranks consumed. What a journal's
// snapshot holds (JobLedger::Snapshot).
struct JobSnapshot {
  // One rank's consumption of an epoch in flight.
  struct Consumed {
    uint64_t epoch = 0;
    uint32_t rank = 0;
    uint64_t done_below = 0;            // every batch below this is consumed
    std::vector<uint64_t> done_above;  // consumed batches above done_below, ascending
  };
  std::string job;
  JobParams params;
  uint64_t finished_below = 0;            // every epoch below this is finished
  std::vector<uint64_t> finished_above;  // finished epochs above finished_below, ascending
  std::vector<Consumed> consumed;        // by epoch, then rank; ranks with none left out
};

// Told of each change of a JobLedger's durable state, in the order the changes happen.
// Called with the ledger's lock held: implementations must be cheap (no disk I/O, no
// waiting) and must not call the ledger.
class LedgerObserver {
 public:
  virtual ~LedgerObserver() = default;
  // A job was created with `params`, nothing consumed, replacing any job of that name.
  virtual void JobCreated(const std::string& job, const JobParams& params) = 0;
  // `ranks` (ascending, not empty) consumed `batch` of `epoch`, each once: a repeated
  // Commit is not reported. One report per Commit; a batched Commit reports the ranks that
  // consumed the same batch together.
  virtual void BatchCommitted(const std::string& job, uint64_t epoch, uint64_t batch,
                              const std::vector<uint32_t>& ranks) = 0;
  // The job was forgotten.
  virtual void JobForgotten(const std::string& job) = 0;
};

class JobLedger final : public JobCoordinator {
 public:
  // Jobs of at most `max_world_size` ranks (config max_world_size; CheckWorldSize).
  explicit JobLedger(uint32_t max_world_size = kDefaultMaxWorldSize)
      : max_world_size_(max_world_size) {}

  // Registers `rank` of job `job`. The first rank creates the job; later ranks must
  // match its params (kInvalidArgument naming the mismatched field and both values).
  // kAlreadyExists if that rank is already joined; kInvalidArgument if rank >= world_size
  // or the plan is impossible (see MakeEpochPlan). A job that no rank is joined to now,
  // asked for with another start (start_epoch, start_position) and otherwise the same
  // params, is replaced: the run was restarted from a checkpoint.
  // Join, then Resume(held) when `held` is not empty (leaving again if that fails).
  Status Join(const std::string& job, uint32_t rank, const JobParams& params,
              const std::vector<HeldBatch>& held = {}) override;

  // The rank's next batch of `epoch`: its first batch neither consumed nor leased, with
  // its sample ids. Blocks while the epoch's order is built (EpochOrders: the next epoch's
  // is built in the background ahead of time); not for an event-loop thread.
  // kFailedPrecondition if the rank already received all its batches of that epoch
  // ("rank 1 already received all 469 batches of epoch 0"); kNotFound if the job does
  // not exist or the rank is not joined.
  Result<BatchLease> Next(const std::string& job, uint32_t rank, uint64_t epoch) override;

  // Marks a lease consumed. Idempotent (also once the epoch is finished and dropped).
  // kNotFound if the job does not exist or `rank` holds no lease of that batch (e.g. it
  // left, and the batch went back to the pool).
  Status Commit(const std::string& job, uint32_t rank, uint64_t epoch, uint64_t batch) override;

  // Batched forms, under one lock: the result of Commit, and of Next, for each entry in
  // order. The commits of one batch by several ranks are reported to the observer
  // together (one journal record per step of a node, not per rank). The batched Next's
  // leases carry their positions only, no sample_ids: for another node's daemon, which
  // computes them itself (EpochOrders); so it never waits for an epoch's order, and may
  // be called on an event-loop thread.
  std::vector<Status> Commit(const std::string& job, const std::vector<RankBatch>& commits);
  std::vector<Result<BatchLease>> Next(const std::string& job,
                                       const std::vector<RankWant>& wants);

  // For a joined `rank`: records `held` (consumed ones as commits, reported to the
  // observer; the others as the rank's leases), so the rank continues where its node
  // stands and nothing it read is served again. Batches of finished epochs are skipped.
  // kNotFound if the job does not exist or the rank is not joined; kInvalidArgument for a
  // batch beyond its epoch's plan.
  Status Resume(const std::string& job, uint32_t rank, const std::vector<HeldBatch>& held);

  // Records that joined `rank` came from node `node` (another daemon's), for Summaries.
  // No-op if the job or the joined rank does not exist.
  void SetRankNode(const std::string& job, uint32_t rank, const std::string& node);

  // The rank leaves: its uncommitted leases are dropped (it is handed them again when it
  // joins again). Forgets the job once every rank has joined and none is left. Idempotent.
  void Leave(const std::string& job, uint32_t rank) override;

  // Batches per rank in a full epoch, and in the job's first epoch (fewer when the job
  // resumed mid-epoch).
  Result<uint64_t> BatchesPerRank(const std::string& job) const override;
  // The jobs whose owner `include` takes (empty: every job): nothing is built of the
  // others.
  std::vector<JobSummary> Summaries(const OwnerFilter& include = {}) const;
  // The principal that created `job`, if the ledger has it.
  std::optional<Principal> OwnerOf(const std::string& job) const;
  // The jobs that `uid` created (for user_limits.jobs), in name order.
  std::vector<std::string> JobsOwnedBy(uid_t uid) const;

  // Forgets every job that has not had each rank of its world join since it was created
  // (or replayed) for `timeout_micros`, counted from the first call that saw it unfilled
  // (so call it periodically, e.g. every second, with the current time). Reported to the
  // observer as forgotten. Later calls for such a job fail with kFailedPrecondition
  // "job 'j' expired: rank 1 of 2 did not join within 600 s" (the last
  // kExpiredRemembered expired names are remembered; a new Join of the name starts a new
  // job). Returns those messages, one per job expired now.
  std::vector<std::string> ExpireUnfilled(uint64_t now_micros, uint64_t timeout_micros);
  static constexpr size_t kExpiredRemembered = 256;

  // From now on reports changes to `observer` (not owned; null: to nobody). It must stay
  // valid until it is replaced; this call waits for a report in progress.
  void SetObserver(LedgerObserver* observer);

  // The durable state of every job, by name. The overload calls `visit` with it while
  // holding the ledger's lock, so no change is reported between the snapshot and the end
  // of `visit` (a journal compacting itself relies on that); `visit` must not call the
  // ledger.
  std::vector<JobSnapshot> Snapshot() const;
  void Snapshot(const std::function<void(const std::vector<JobSnapshot>&)>& visit) const;

  // Replay, for a journal at startup. None of these is reported to the observer.
  // Creates job `job` with `params` and nothing consumed, replacing any job of that name;
  // kInvalidArgument for params Join would refuse (an impossible plan).
  Status ReplayJob(const std::string& job, const JobParams& params);
  // Marks batches [first, end) of `epoch` consumed by `rank`, finishing the epoch once
  // every rank consumed all its batches; batches already consumed and finished epochs
  // are ignored. kNotFound for an unknown job; kInvalidArgument for a rank or batch out
  // of range.
  Status ReplayConsumed(const std::string& job, uint32_t rank, uint64_t epoch, uint64_t first,
                        uint64_t end);
  // Marks epochs [first, end) finished, dropping their state. kNotFound for an unknown job.
  Status ReplayEpochsFinished(const std::string& job, uint64_t first, uint64_t end);
  // Forgets job `job` (nothing if there is none).
  void ReplayForget(const std::string& job);

 private:
  // An epoch's state lives from its first lease until every rank consumed all its
  // batches; then it is dropped and the epoch only recorded as finished, so memory stays
  // bounded by the epochs in flight.
  struct RankState {
    uint64_t done_below = 0;        // every batch below this is consumed
    std::set<uint64_t> done_above;  // consumed batches above done_below
    uint64_t next = 0;              // where the search for the next lease starts
    std::set<uint64_t> leased;      // handed out, not consumed

    bool Done(uint64_t batch) const { return batch < done_below || done_above.count(batch); }
  };
  struct EpochState {
    StepLayout layout;
    std::vector<RankState> ranks;  // by rank
    uint32_t ranks_done = 0;       // ranks that consumed all their batches
  };
  struct JobState {
    JobParams params;
    uint64_t batches_per_rank = 0;  // in a full epoch
    std::vector<bool> joined;       // by rank: joined now
    std::vector<bool> ever_joined;  // by rank: joined at some point
    std::vector<std::string> nodes;  // by rank: where it joined from; empty: here
    std::map<uint64_t, EpochState> epochs;  // epochs in flight
    uint64_t finished_below = 0;            // every epoch < this is finished
    std::set<uint64_t> finished_above;      // finished epochs > finished_below
    uint64_t epochs_started = 0;
    uint64_t batches_leased = 0;
    uint64_t batches_committed = 0;
    uint64_t unfilled_since = 0;  // ExpireUnfilled's first sight of it unfilled; 0: none

    bool IsFinished(uint64_t epoch) const {
      return epoch < finished_below || finished_above.count(epoch) > 0;
    }
    void MarkFinished(uint64_t epoch);
  };

  using EpochMap = std::map<uint64_t, EpochState>;  // JobState::epochs

  Status JoinOnly(const std::string& job, uint32_t rank, const JobParams& params);
  // Creates the job's state for `params` (validated).
  static Result<JobState> NewJob(const std::string& job, const JobParams& params);

  // The state of `epoch` (not finished) of job `job`, created with its layout on first use.
  // Called with mu_ held (the state is jobs_'s).
  static Result<EpochMap::iterator> EpochOf(const std::string& job, JobState& state,
                                            uint64_t epoch);

  // Next and Commit of one rank. Commit's `*committed`: the lease became consumed now
  // (not reported to the observer: the caller does). Called with mu_ held.
  static Result<BatchLease> NextLocked(const std::string& job, JobState& state, uint32_t rank,
                                       uint64_t epoch);
  static Status CommitLocked(const std::string& job, JobState& state, uint32_t rank,
                             uint64_t epoch, uint64_t batch, bool* committed);

  // Marks `batch` (not yet consumed) consumed by `rank`; when that finishes the epoch,
  // drops its state (invalidating `eit`) and returns true. Called with mu_ held.
  static bool Consume(JobState& state, EpochMap::iterator eit, uint32_t rank, uint64_t batch);

  friend class JobLedgerTestPeer;  // job_ledger_test.cc: checks that memory stays bounded

  // kNotFound "job 'j' does not exist", or the expiry of a job of that name.
  Status Missing(const std::string& job) const REQUIRES(mu_);

  const uint32_t max_world_size_;
  mutable Mutex mu_;
  std::map<std::string, JobState> jobs_ GUARDED_BY(mu_);
  // Expired jobs' messages, by name, and their names oldest first.
  std::map<std::string, std::string> expired_ GUARDED_BY(mu_);
  std::deque<std::string> expired_order_ GUARDED_BY(mu_);
  LedgerObserver* observer_ GUARDED_BY(mu_) = nullptr;  // not owned
  EpochOrders orders_;                     // the sample ids of local ranks' leases
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_JOB_LEDGER_H_
