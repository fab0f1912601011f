// JobCoordinator: what a rank's stream needs of the daemon that coordinates its job.
//
// The JobLedger is the implementation for jobs this daemon coordinates; a proxy to
// another node's daemon is the implementation for the jobs it coordinates. The calls are
// the JobLedger's (see job_ledger.h for their semantics and errors); a proxy may also
// fail them with kUnavailable or kDeadlineExceeded when the coordinator cannot be reached.
// Implementations are safe to call from any thread; calls may block (a proxy waits for
// its coordinator, within a deadline), so never call them on an event-loop thread.
#ifndef EMBER_DAEMON_COORDINATOR_JOB_COORDINATOR_H_
#define EMBER_DAEMON_COORDINATOR_JOB_COORDINATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/access/principal.h"
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
  uint64_t start_epoch = 0;     // epochs before it count as finished
  uint64_t start_position = 0;  // positions of start_epoch's order already consumed
  uint64_t fingerprint = 0;     // the dataset's (catalog/fingerprint.h); 0: not checked
  // Who created the job (its first rank), or who joins it: a rank joins only a job its
  // principal may access (MayAccess). Not compared as a param.
  Principal owner{};
  ShuffleShape shuffle_shape{};  // the dataset's (by shards when registered so)
};

struct BatchLease {
  uint64_t epoch = 0;
  uint64_t batch = 0;           // the global step of the epoch's plan; the rank's slice of it
  uint64_t index_in_epoch = 0;  // = batch: the rank's batches of an epoch are its steps
  bool last_in_epoch = false;   // the epoch's last step
  uint64_t step_end = 0;        // the epoch's order is consumed up to here once every rank
                                // consumed this step (a Loader's resume position)
  uint64_t step_begin = 0;      // the step's first position
  PositionRange positions;      // the batch's positions of the epoch's order
  std::vector<uint64_t> sample_ids;  // the samples at `positions` (EpochOrders)
};

// A batch a rank holds when it joins again after losing its daemon or its coordinator:
// consumed (the trainer has it; its commit may not have reached the journal) or leased
// (in the stream's ring, not yet read).
struct HeldBatch {
  uint64_t epoch = 0;
  uint64_t batch = 0;
  bool consumed = false;
};

// One rank's batch, or one rank's want of its next batch of an epoch, in a batched call
// (a node's daemon speaks for all its ranks of a job at once: schemas/peer.capnp).
struct RankBatch {
  uint32_t rank = 0;
  uint64_t epoch = 0;
  uint64_t batch = 0;
};
struct RankWant {
  uint32_t rank = 0;
  uint64_t epoch = 0;
};

class JobCoordinator {
 public:
  virtual ~JobCoordinator() = default;

  // `held`: what the rank holds when it joins again (empty for a first join); recorded so
  // that the rank continues where it stands and nothing it read is served again.
  virtual Status Join(const std::string& job, uint32_t rank, const JobParams& params,
                      const std::vector<HeldBatch>& held = {}) = 0;
  virtual Result<BatchLease> Next(const std::string& job, uint32_t rank, uint64_t epoch) = 0;
  virtual Status Commit(const std::string& job, uint32_t rank, uint64_t epoch,
                        uint64_t batch) = 0;
  virtual void Leave(const std::string& job, uint32_t rank) = 0;
  virtual Result<uint64_t> BatchesPerRank(const std::string& job) const = 0;

  // True for a proxy whose calls wait for another daemon through an event loop: a caller
  // must not hold a lock across them that code on that loop takes. A lease such a
  // coordinator grants to a rank that has left belongs to the membership it left and goes
  // back with it. False (the local ledger): calls take only the ledger's own lock.
  virtual bool remote() const { return false; }
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_JOB_COORDINATOR_H_
