// ShareGroup: one producer for the streams of several jobs that read one dataset in one
// order (StreamParams::share). Every job of a group reads the same dataset with the same
// seed and shuffle, so its batches are runs of one sequence of rows: row R is position
// R % count of epoch R / count's order (MakeEpochOrder), decoded with SampleContext
// {seed, epoch}. The group decodes each row once into a ring of rows in a write-sealed
// memfd; the members' rings point their tensors at those rows (ring_layout.h, shared
// regions), so a batch decoded for the group lives once in memory, mapped read-only by
// every member's reader.
//
// Demand: the group decodes the rows its members want next (Want), up to one step past
// the furthest of them; when no member wants rows near the last one decoded, it jumps to
// the nearest one wanted (a job that starts later in the order). It never writes over a
// row a member's slot holds (Take until the reader hands the slot back): it skips those
// positions. Otherwise it writes over the oldest rows, but not over rows its slowest
// member still wants (from that member's next batch on): it waits for that member. When
// the member has held it back for hold_ms, it is let go: the group runs on, and the
// member, finding its rows gone, decodes its batches itself, with the same bytes, until
// it reaches rows the group still holds (the group then waits for it again). So members
// that read at the same pace stay together through jitter, and a slower or stopped one
// holds the others back for hold_ms at most.
//
// Thread-safety: all methods are safe from any thread. Decoding runs on the DecodePool.
#ifndef EMBER_DAEMON_STREAM_SHARE_GROUP_H_
#define EMBER_DAEMON_STREAM_SHARE_GROUP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"
#include "daemon/catalog/dataset.h"
#include "daemon/data/source.h"
#include "daemon/ring/ring_writer.h"
#include "daemon/stream/decode_pool.h"
#include "ember/ring_layout.h"
#include "ember/status.h"

namespace ember::daemon {

class ShareGroup {
 public:
  struct Params {
    std::string name;      // for messages and the memfd's name
    uint64_t seed = 0;
    bool shuffle = true;
    uint64_t rows = 0;     // capacity wanted, in rows (rounded up to whole pages)
    uint64_t step_rows = 0;  // how far past the furthest member the group decodes ahead
    // How long the group waits for a member a window behind the furthest one before that
    // member decodes its own batches (see above).
    uint64_t hold_ms = 2000;
  };
  // The memfd holds, for each of the dataset's tensors, a ring of `rows` rows. A tensor
  // whose rows are at least a page goes to the members' readers as a shared region;
  // smaller ones (labels) are copied into the members' slots.
  static Result<std::shared_ptr<ShareGroup>> Create(Env& env, const DatasetInfo& info,
                                                    DecodePool* pool, Params params);
  // Waits for the decode tasks in flight.
  ~ShareGroup();

  const Params& params() const { return params_; }
  uint64_t fingerprint() const { return fingerprint_; }
  const std::string& dataset() const { return dataset_; }
  int fd() const { return shm_->fd(); }
  size_t bytes() const { return shm_->size(); }
  uint64_t capacity() const { return capacity_; }
  // The ring header's shared regions, and the region (1-based) of the dataset's tensor
  // `t` (0: copied into the slots).
  const std::vector<ring::SharedRegion>& regions() const { return regions_; }
  uint32_t RegionOf(size_t t) const { return tensors_[t].region; }
  // The daemon's view of tensor `t`'s row at `position` (< capacity()).
  const uint8_t* Row(size_t t, uint64_t position) const;

  // The source to decode from (the members' own; the first one set is kept).
  void SetSource(std::shared_ptr<const Source> source);

  using MemberId = uint64_t;
  // A member whose slots are `ring`'s (which must outlive its membership), that reads no
  // row before `first_row` nor at or past `end_row` (0: no end). Until its first Want the
  // group keeps rows from `first_row` for it (a member joining as another runs is waited
  // for from the start, not only once it asks).
  MemberId Join(const RingWriter* ring, uint64_t first_row, uint64_t end_row);
  // Drops the member's wants and its slots' pins.
  void Leave(MemberId member);
  // The member reads rows [begin, end) next.
  void Want(MemberId member, uint64_t begin, uint64_t end);
  // Waits until rows [begin, end) are decoded, then pins them for the member's slot
  // `slot` and returns the position of `begin` (row begin + i is at (position + i) %
  // capacity()). nullopt: the member decodes the batch itself: a row was written over or
  // failed to decode, the rows are not contiguous (the group skipped pinned positions
  // among them), `stop` became true, or nothing moved for `deadline_ms`.
  std::optional<uint64_t> Take(MemberId member, uint32_t slot, uint64_t begin, uint64_t end,
                               const std::atomic<bool>& stop, uint64_t deadline_ms = 30000);
  // The slot pinned by Take is published: its rows stay until the reader frees the slot.
  void Published(MemberId member, uint32_t slot);
  // The slot pinned by Take was given back unpublished.
  void Unpin(MemberId member, uint32_t slot);

  // The epoch a new job of the group starts at (the same for every rank of `job`): the
  // first whose first row the group still holds or has yet to decode (0 while it holds
  // row 0): a job that comes late waits for the group's next epoch rather than miss the
  // rows decoded before it came.
  uint64_t StartEpochFor(const std::string& job);

  struct Stats {
    uint64_t rows_decoded = 0;  // each once
    uint64_t rows_failed = 0;
    uint32_t members = 0;
  };
  Stats stats() const;

 private:
  struct TensorRing {
    uint64_t row_bytes = 0;
    uint64_t offset = 0;  // in the memfd
    uint32_t region = 0;  // 1-based, 0: copied
  };
  struct Pin {
    uint64_t position = 0, rows = 0;
    bool published = false;
  };
  struct Member {
    const RingWriter* ring = nullptr;
    uint64_t want_begin = 0, want_end = 0;
    uint64_t end_row = 0;  // 0: none
    bool let_go = false;         // the group no longer waits for it
    uint64_t let_go_at = 0;      // its want_begin when it was let go
    int64_t holding_since = -1;  // steady-clock ms since it holds the group back, or -1
    std::map<uint32_t, Pin> pins;  // by slot
  };
  enum class RowState : uint8_t { kEmpty, kDecoding, kReady, kFailed };

  ShareGroup(const DatasetInfo& info, DecodePool* pool, Params params, uint64_t capacity,
             std::vector<TensorRing> tensors, std::vector<ring::SharedRegion> regions,
             std::unique_ptr<SharedMemory> shm);
  // Hands rows to positions as demand and pins allow and starts decode tasks.
  void AssignLocked() REQUIRES(mu_);
  // The first row to keep for the members the group waits for: the slowest one's next
  // (*slowest); a member let go is waited for again once it moved on to rows still held.
  uint64_t KeepFromLocked(Member** slowest) REQUIRES(mu_);
  bool PinnedLocked(uint64_t position) REQUIRES(mu_);
  // The first row the group still holds or has yet to decode: a job that would start
  // before it cannot be served from the group.
  uint64_t FirstHeldRowLocked() const REQUIRES(mu_);
  // Where row `row` was put, if it was (it may since have been written over).
  std::optional<uint64_t> PositionOfLocked(uint64_t row) const REQUIRES(mu_);
  // The sample id of `row`.
  uint64_t SampleOfLocked(uint64_t row) REQUIRES(mu_);
  void DecodeTask();

  const Params params_;
  const std::string dataset_;
  const uint64_t count_;
  const uint64_t fingerprint_;
  DecodePool* const pool_;
  const uint64_t capacity_;
  const std::vector<TensorRing> tensors_;
  const std::vector<ring::SharedRegion> regions_;
  std::unique_ptr<SharedMemory> shm_;

  mutable Mutex mu_;
  CondVar changed_;  // rows decoded, members gone
  std::shared_ptr<const Source> source_ GUARDED_BY(mu_);
  std::map<MemberId, Member> members_ GUARDED_BY(mu_);
  MemberId next_member_ GUARDED_BY(mu_) = 1;
  uint64_t next_row_ GUARDED_BY(mu_) = 0;   // the next row to hand a position
  bool started_ GUARDED_BY(mu_) = false;    // next_row_ was set by a want
  uint64_t cursor_ GUARDED_BY(mu_) = 0;     // the next position to write
  std::vector<uint64_t> row_at_ GUARDED_BY(mu_);   // row + 1 at each position, 0: none
  std::vector<RowState> state_ GUARDED_BY(mu_);
  std::map<uint64_t, uint64_t> runs_ GUARDED_BY(mu_);  // first row -> its position
  std::deque<std::pair<uint64_t, uint64_t>> queue_ GUARDED_BY(mu_);  // (row, position)
  uint32_t tasks_ GUARDED_BY(mu_) = 0;  // decode tasks running or posted
  // Epoch orders of the rows being handed out (a few epochs).
  std::map<uint64_t, std::vector<uint64_t>> orders_ GUARDED_BY(mu_);
  uint64_t rows_decoded_ GUARDED_BY(mu_) = 0;
  uint64_t rows_failed_ GUARDED_BY(mu_) = 0;
  bool closing_ GUARDED_BY(mu_) = false;
  std::map<std::string, uint64_t> job_starts_ GUARDED_BY(mu_);  // StartEpochFor's answers
  // Rows below it are decoded (or failed), above it some may still be decoding; Take's
  // waiters are woken when it passes the end they wait for.
  uint64_t decoded_below_ GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> waiting_ends_ GUARDED_BY(mu_);
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_STREAM_SHARE_GROUP_H_
