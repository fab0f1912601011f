// Journal: a write-ahead log of opaque records in one file, made durable in groups. The
// coordinator appends each change of a job's state as a record, replays the records when
// it restarts, and now and then compacts the file by rewriting it as a snapshot. What a
// record means is the owner's business; the journal only keeps bytes in order.
//
// Glossary
//   record     an opaque byte string of at most JournalOptions::max_record_bytes.
//   sequence   the number of an Append on one Journal object: 1, 2, ... (records replayed
//              by Open or written by Rewrite have none).
//   durable    written and flushed to the disk (fdatasync): it survives a crash.
//              durable_sequence() is the highest sequence that is durable together with
//              every earlier one.
//   group sync one write and one fdatasync of every record appended since the previous
//              one (Sync). A background thread runs it when anything is unsynced, at most
//              once per group_interval_micros; callers may run it themselves.
//   torn tail  an incomplete or corrupt last record, as a crash in the middle of a write
//              leaves; cut off by Open.
//
// File format, little-endian:
//   header   16 bytes: char[8] magic "EMBJOURN", u32 version (1), u32 reserved (0)
//   records  back to back, each [u32 length][u32 CRC][length bytes of payload]; the CRC
//            is zlib's CRC-32 of the 4 length bytes followed by the payload, so a run of
//            zeros (blocks a crash left unwritten) never reads as a record.
// A new file, and every rewrite, is written to "<path>.tmp", flushed, renamed over
// `path`, and the directory flushed: `path` always holds a complete header, and a crash
// at any point leaves the old file or the new one, whole.
//
// Thread-safety: every method may be called from any thread. Append takes one mutex for
// a memcpy; the write and the fdatasync run outside it (records appended meanwhile are
// buffered for the next group), so appends never wait for the disk. Sync and Rewrite
// wait for each other.
// Errors: a failed write or sync makes the journal failed for good (sticky): every later
// Append, Sync, Rewrite and WaitDurable returns that first error, which names the file,
// and nothing is reported durable that is not. Open's and Rewrite's errors before the
// rename leave the file as it was.
#ifndef EMBER_DAEMON_COORDINATOR_JOURNAL_H_
#define EMBER_DAEMON_COORDINATOR_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "ember/status.h"

namespace ember::daemon {

struct JournalOptions {
  // The background thread syncs at most once per interval, as soon as anything is
  // unsynced and the interval since its previous sync has passed. 0: no background
  // thread; records become durable only when someone calls Sync (or Rewrite).
  uint64_t group_interval_micros = 20000;
  // The largest record Append and Rewrite take, and Open reads (1 .. 1 GiB).
  uint32_t max_record_bytes = uint32_t{1} << 20;
};

class Journal;

// What Open found.
struct JournalReplay {
  std::unique_ptr<Journal> journal;  // never null
  std::vector<std::string> records;  // the file's valid records, in order
  uint64_t torn_bytes = 0;           // cut off the end as a torn tail (0: none); log it
  bool created = false;              // the file did not exist and was created empty
};

class Journal {
 public:
  // The size of the file's header, before the first record.
  static constexpr uint64_t kHeaderBytes = 16;

  // Opens the journal `path` for appending; `env` (not owned) must outlive it. A file that
  // does not exist is created (with its header, flushed, directory flushed). An existing
  // one is replayed: its records are returned, a torn tail is cut off (the file truncated
  // after the last good record and flushed) and counted in torn_bytes. A leftover
  // "<path>.tmp" (a rewrite that crashed before its rename) is removed.
  // A bad record (cut short, or a CRC mismatch) is a torn tail when no good record starts
  // anywhere after it.
  // Errors: kDataLoss "<path>: ..." naming the byte offset for damage before the tail (a
  // bad record with a good one after it, a length over max_record_bytes, which a torn
  // write never leaves) and for a bad header (size, magic, version),
  // and the file is left untouched; kInvalidArgument for bad options; Env's errors (they
  // name the file).
  static Result<JournalReplay> Open(Env& env, const std::string& path,
                                    JournalOptions options = {});

  // Stops the background thread, then syncs what is buffered (best effort: a failure is
  // lost, the records stay not durable). Blocks while a sync is in progress.
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  const std::string& path() const { return path_; }

  // Buffers `record` for the next group sync and returns its sequence. Never waits for
  // the disk; the record is durable once durable_sequence() reaches the sequence.
  // kInvalidArgument "<path>: record of N bytes is over the limit of M" (the journal stays
  // usable); the sticky error once the journal has failed.
  Result<uint64_t> Append(std::string_view record);

  // Writes what is buffered and flushes it (fdatasync): every record appended before the
  // call is durable when it returns OK. Blocks for the disk, and while another Sync or a
  // Rewrite runs. The error (sticky) names the file.
  Status Sync();

  // Waits until the Append that returned `sequence` is durable: OK at once if it already
  // is. Does not sync itself: with group_interval_micros 0 someone must call Sync.
  // kDeadlineExceeded "<path>: record S not durable after T ms (durable up to D)";
  // the sticky error if the journal fails first; kInvalidArgument for a sequence not yet
  // returned by Append.
  Status WaitDurable(uint64_t sequence, uint32_t timeout_ms);

  // The highest sequence that is durable with every earlier one (0: none yet).
  uint64_t durable_sequence() const;
  // The sequence of the last Append (0: none yet).
  uint64_t last_sequence() const;

  // Compaction: replaces the file's contents with `records` (a snapshot of the owner's
  // state). First syncs what is buffered into the current file, then writes
  // "<path>.tmp", flushes it, renames it over `path`, flushes the directory and goes on
  // appending to the new file. Records appended while it runs go to the new file, after
  // the snapshot. The caller must make sure that every record appended before the call is
  // reflected in `records` (e.g. by holding its own state lock from taking the snapshot
  // until Rewrite returns): those records are dropped with the old file.
  // Blocks for the disk, and while a Sync runs. Errors: kInvalidArgument for a record over
  // max_record_bytes (nothing changes); a failure before the rename leaves the old file
  // complete and the journal usable (the temporary file is removed); a failure at or
  // after the directory flush leaves the new file complete but makes the journal failed.
  Status Rewrite(const std::vector<std::string>& records);

  // The file's size once what is buffered is written: header and framed records. The
  // owner compacts when it grows well past its snapshot (e.g. 4x).
  uint64_t file_bytes() const;

  // How many group syncs (fdatasyncs of appended records) have completed.
  uint64_t sync_count() const;

  // OK, or the error that failed the journal for good.
  Status status() const;

 private:
  Journal(Env& env, std::string path, JournalOptions options);

  // Write and flush what is buffered.
  Status SyncLocked() REQUIRES(write_mu_);

  // Writes `records` to "<path>.tmp" (after the header), flushes it, renames it over
  // path_, flushes the directory and opens the result for appending; *bytes is its size.
  // *renamed says whether the rename happened (then path_ holds the new file, even if the
  // call fails after it). Requires write_mu_ (or no other thread yet).
  Result<std::unique_ptr<WritableFile>> WriteNewFile(const std::vector<std::string>& records,
                                                     uint64_t* bytes, bool* renamed);

  // Makes `error` the sticky failure (the first one stays).
  void Fail(const Status& error) REQUIRES(mu_);

  // The background thread: group syncs until stopping_.
  void SyncLoop();

  Env* const env_;
  const std::string path_;
  const std::string tmp_path_;  // "<path>.tmp"
  const std::string dir_;       // the directory of path_
  const JournalOptions options_;

  // Held by whoever writes the file (Sync, Rewrite), taken before mu_, never by Append.
  Mutex write_mu_;
  std::unique_ptr<WritableFile> file_ GUARDED_BY(write_mu_);
  uint64_t write_offset_ GUARDED_BY(write_mu_) = 0;  // the file's end
  std::string writing_ GUARDED_BY(write_mu_);  // the group being written

  mutable Mutex mu_;
  CondVar durable_changed_;  // durable_sequence_ or status_ changed
  CondVar work_;             // pending_ filled, or stopping_
  std::string pending_ GUARDED_BY(mu_);  // framed, not yet written
  uint64_t last_sequence_ GUARDED_BY(mu_) = 0;
  uint64_t durable_sequence_ GUARDED_BY(mu_) = 0;
  uint64_t file_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t sync_count_ GUARDED_BY(mu_) = 0;
  Status status_ GUARDED_BY(mu_);  // sticky failure
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread syncer_;                       // runs SyncLoop; absent for interval 0
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_COORDINATOR_JOURNAL_H_
