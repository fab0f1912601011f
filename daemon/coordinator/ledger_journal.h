// LedgerJournal: makes a JobLedger's state survive a crash of the daemon. It observes the
// ledger (LedgerObserver) and appends each change to a Journal (journal.h), replays the
// journal into the ledger at startup, and compacts the journal into a snapshot of the
// ledger when it grows.
//
// What is journaled: each job's params when it is created, each batch a rank consumed,
// the job's end when it is forgotten. Leases are not: a restarted daemon has no streams,
// its ranks join again and are leased again what they had not consumed.
//
// Durability: commits never wait for the disk; the journal syncs them in groups (every
// group_interval_micros, 20 ms by default), and while a compaction writes its snapshot
// the changes meanwhile are held in memory and appended after it. So a crash loses the
// changes of the last group interval (and of a compaction in progress): those batches
// count as not consumed and are served again after the restart, unless what the rank
// reports on rejoining covers them.
//
// Record format (each a Journal record; integers are LEB128 varints, strings a varint
// length then the bytes; the first byte is the record's tag):
//   1 format    version (1). The first record of every file, and only there.
//   2 job       id, name, dataset, num_samples, batch_size, world_size, seed,
//               shuffle (one byte, 0 or 1), start_epoch, start_position, fingerprint,
//               owner uid, owner flags, shuffle blocks' digest, shuffle window (the
//               last four absent in records of older versions; the blocks themselves
//               come with the ranks that join the replayed job).
//               Creates the job (or replaces the one of that name) under the id, which
//               the other records use for it.
//   3 commit    id, rank, epoch, batch: the rank consumed the batch.
//   7 commits   id, epoch, batch, n, n runs of (first rank, count): those ranks consumed
//               the batch (a node's ranks committing one step: one record, not one each).
//   4 forget    id: the job was forgotten; the id is free again.
//   5 finished  id, below, n, n epochs: epochs below `below` and the n listed are finished.
//   6 consumed  id, epoch, rank, below, n, n batches: the rank consumed the batches below
//               `below` of the epoch and the n listed (a snapshot's form of commits).
// A snapshot (compaction) is: format, then per job: job, finished, consumed per (epoch,
// rank) with anything consumed (a long list split over several records).
//
// Thread-safety: the observer calls come with the ledger's lock held and take this
// object's own mutex for an encoding and Journal::Append (a memcpy); Compact may run on
// any thread (one at a time; a background thread runs it when the file grows); every
// other method may be called from any thread.
#ifndef EMBER_DAEMON_COORDINATOR_LEDGER_JOURNAL_H_
#define EMBER_DAEMON_COORDINATOR_LEDGER_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "daemon/coordinator/job_ledger.h"
#include "daemon/coordinator/journal.h"
#include "ember/status.h"

namespace ember::daemon {

struct LedgerJournalOptions {
  JournalOptions journal;
  // A background thread compacts the journal once the file has grown past both
  // compact_min_bytes and compact_factor times its size after the previous compaction.
  // compact_min_bytes 0: never on its own, only when Compact is called.
  uint64_t compact_min_bytes = uint64_t{4} << 20;
  uint32_t compact_factor = 4;
};

class LedgerJournal;

// What Open replayed.
struct LedgerReplay {
  std::unique_ptr<LedgerJournal> journal;  // never null
  uint64_t records = 0;     // the journal's records
  uint64_t jobs = 0;        // jobs in the ledger after the replay
  uint64_t commits = 0;     // commit records replayed
  uint64_t torn_bytes = 0;  // cut off the end as a torn tail (Journal::Open); log it
  bool created = false;     // the file did not exist and was created
};

class LedgerJournal final : public LedgerObserver {
 public:
  // Opens the journal at `path` (Journal::Open: created if missing, a torn tail cut off),
  // replays its records into `ledger`, which should hold no jobs yet, and from then on
  // journals the ledger's changes. `env` and `ledger` (not owned) must outlive the
  // returned object.
  // Errors: Journal::Open's (kDataLoss naming the file and the byte offset of damage);
  // kDataLoss "<path>: record N (<kind>): ..." for a record that does not decode or does
  // not apply to the ledger (a job id never created, a batch out of range); the ledger
  // may then hold part of the journal's state.
  static Result<LedgerReplay> Open(Env& env, const std::string& path, JobLedger* ledger,
                                   LedgerJournalOptions options = {});

  // Stops observing the ledger and the background compaction (waiting for one in
  // progress), then closes the journal, syncing what is buffered (Journal's destructor).
  ~LedgerJournal() override;
  LedgerJournal(const LedgerJournal&) = delete;
  LedgerJournal& operator=(const LedgerJournal&) = delete;

  // Rewrites the journal as a snapshot of the ledger (Journal::Rewrite), without holding
  // the ledger's lock for the disk: changes made while it runs are appended after the
  // snapshot. Blocks for the disk; waits for a compaction in progress. Errors:
  // Journal::Rewrite's (the journal stays usable when they come before its rename).
  Status Compact();

  // OK, or the first error that stopped changes from being journaled (the journal
  // failed, or a record was over its size limit): from then on the ledger's state is no
  // longer durable. The error is logged once when it happens.
  Status status() const;

  // Compactions completed.
  uint64_t compactions() const;

  // The journal, e.g. to Sync or WaitDurable in tests.
  Journal& journal() { return *journal_; }

  // LedgerObserver: called by the ledger with its lock held.
  void JobCreated(const std::string& job, const JobParams& params) override;
  void BatchCommitted(const std::string& job, uint64_t epoch, uint64_t batch,
                      const std::vector<uint32_t>& ranks) override;
  void JobForgotten(const std::string& job) override;

 private:
  LedgerJournal(JobLedger* ledger, std::unique_ptr<Journal> journal,
                LedgerJournalOptions options);

  // Replays `records` into ledger_ and sets up ids_; counts into *replay.
  Status Replay(const std::vector<std::string>& records, LedgerReplay* replay);

  // The job's id, a new one if it has none.
  uint64_t IdOf(const std::string& job) REQUIRES(mu_);

  // Appends `record` (or holds it while a compaction runs) and asks for a compaction
  // when the file has grown enough.
  void AppendLocked(const std::string& record) REQUIRES(mu_);

  // Makes `error` the sticky failure (the first one stays) and logs it.
  void Fail(const Status& error) REQUIRES(mu_);

  // The background thread: compacts when asked, until stopping_.
  void CompactLoop();

  JobLedger* const ledger_;
  const std::unique_ptr<Journal> journal_;
  const LedgerJournalOptions options_;

  Mutex compact_mu_;  // held through Compact: one at a time; taken before the ledger's

  mutable Mutex mu_;  // taken after the ledger's lock
  CondVar compact_wanted_;              // compact_requested_ or stopping_
  std::unordered_map<std::string, uint64_t> ids_ GUARDED_BY(mu_);  // live jobs' ids
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::string scratch_ GUARDED_BY(mu_);  // record encoding
  bool diverting_ GUARDED_BY(mu_) = false;  // Compact writes
  std::vector<std::string> held_ GUARDED_BY(mu_);  // while diverting_
  uint64_t compacted_bytes_ GUARDED_BY(mu_) = 0;  // file after Compact
  uint64_t compactions_ GUARDED_BY(mu_) = 0;
  bool compact_requested_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  Status status_ GUARDED_BY(mu_);  // sticky failure
  std::thread compactor_;  // runs CompactLoop; absent when compact_min_bytes is 0
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_LEDGER_JOURNAL_H_
