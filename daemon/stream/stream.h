// Stream: what one rank of a job reads. A producer thread leases the rank's batches from
// the job's coordinator (the local JobLedger or a proxy to another node's), gathers their samples from the dataset's Source and writes them in
// place into the stream's ring; the trainer reads them from the same memory. When the
// producer gets a slot back from the trainer, it commits the batch that slot held.
//
// Lifetime: the StreamManager holds a Stream for as long as the trainer holds its Stream
// capability (or its connection lives). Stop() ends the rank's part in the job at once
// (commits what the trainer consumed, returns the rest of its leases) and tells the
// producer to stop without waiting for it; destroying the Stream waits for the producer
// and unmaps the ring (the memfd itself dies with the trainer's mapping).
// Thread-safety: Stop(), Stats() and the accessors may be called from any thread.
#ifndef EMBER_DAEMON_STREAM_STREAM_H_
#define EMBER_DAEMON_STREAM_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "daemon/catalog/dataset.h"
#include "daemon/coordinator/job_coordinator.h"
#include "common/env.h"
#include "common/log_budget.h"
#include "daemon/data/dataset_cache.h"
#include "daemon/decode/remote_decoders.h"
#include "daemon/ring/ring_writer.h"
#include "daemon/stream/decode_pool.h"
#include "daemon/stream/share_group.h"
#include "daemon/stream/stream_forecast.h"
#include "ember/status.h"

namespace ember::daemon {

struct StreamParams {
  std::string job;
  std::string dataset;
  uint32_t batch_size = 0;
  uint64_t seed = 0;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  uint32_t epochs = 1;  // 0: unbounded
  bool shuffle = true;
  uint32_t slots = 0;   // resolved by the caller (never 0 here)
  uint32_t start_epoch = 0;
  uint64_t start_position = 0;  // of start_epoch's order: the job resumes mid-epoch
  bool sample_ids = false;      // add a "sample_id" int64 tensor to every batch
  uint64_t expect_fingerprint = 0;  // the dataset's, as a saved loader state says; 0: any
  std::string coordinator;  // HOST:PORT of the job's coordinating daemon; empty: this one
  // The rank opens its stream again (its daemon restarted): its trainer received batches
  // [0, rejoin_received) of rejoin_epoch (and every epoch before it); the producer starts
  // after them.
  bool rejoin = false;
  uint64_t rejoin_epoch = 0;
  uint64_t rejoin_received = 0;
  // A share group (empty: none): jobs that read the dataset with the same seed and name
  // the same group read rows the group decoded once (share_group.h). Per uid, unless
  // the dataset is shared.
  std::string share;
  // Who opens the stream (the connection's principal, not the client's say): it must
  // be allowed to read the dataset and join the job, and its ring counts against its
  // share of the budget.
  Principal owner;
};

struct StreamStats {
  uint64_t id = 0;
  StreamParams params;
  uint64_t epoch = 0;
  uint64_t batches_published = 0;
  uint64_t batches_consumed = 0;
  double samples_per_second = 0;  // over the last few seconds of publishing
  double ring_fill = 0;
  uint32_t slot_count = 0;
  uint32_t prefetch_depth = 0;  // slots the producer may keep out of the reader's free ones
  uint32_t slots_touched = 0;   // slots ever written: the ring's memory in use
  uint64_t samples_skipped = 0;  // corrupt samples dropped under on_error: skip
  // Counters over the stream's life (they only grow): samples and payload bytes in the
  // batches published, samples that failed to read or decode (the skipped ones, and
  // under on_error: fail the one that ended the stream), and the seconds the trainer
  // waited for a batch that was not ready (data stall; the SDK's own account, written
  // into the ring header).
  uint64_t samples_published = 0;
  uint64_t bytes_published = 0;
  uint64_t decode_errors = 0;
  double data_stall_seconds = 0;
  // Batches served from the share group's rows (the rest were decoded for this stream).
  uint64_t shared_batches = 0;
  // Rows remote decode workers decoded for this stream.
  uint64_t remote_rows = 0;
};

// Bytes of payload one batch of `batch_size` samples with `tensors` needs in a slot.
uint64_t BatchPayloadBytes(const std::vector<TensorSpec>& tensors, uint32_t batch_size);

// The tensors of a stream's batches: the dataset's, then "sample_id" (int64, each
// sample's index in the dataset) if asked for.
std::vector<TensorSpec> StreamTensors(const DatasetInfo& info, bool sample_ids);

class Stream {
 public:
  // Joins the job at `coordinator` (kInvalidArgument on params that do not match the job's),
  // creates the ring and starts the producer. The dataset loads in the background; a load
  // error ends the stream with it (the reader sees kDataLoss and the message). Sources
  // that decode spread each batch over `decode_pool` (may be null: all work inline);
  // the pool must outlive the stream. With `group` (params.share), batches come from the
  // group's rows where it holds them. With `remote` (which must outlive the stream), parts
  // of the batches it decodes go to remote decode workers.
  static Result<std::unique_ptr<Stream>> Start(uint64_t id, Env& env, JobCoordinator& coordinator,
                                               const DatasetInfo& info,
                                               DatasetCache::SourceFuture source,
                                               DecodePool* decode_pool,
                                               const StreamParams& params,
                                               std::shared_ptr<ShareGroup> group = nullptr,
                                               RemoteDecoders* remote = nullptr);
  // Stop()s, then waits for the producer, which may take as long as the Source call it
  // is in. A reader still attached learns that the stream was cancelled.
  ~Stream();

  // Tells the producer to stop and leaves the job: the batches whose slots the reader has
  // handed back are committed, the rest of this rank's leases return to the job, so the
  // rank may join again at once. Returns without waiting for the producer; from then on
  // it neither leases nor publishes another batch. Idempotent.
  void Stop();

  // The daemon is shutting down: the producer finishes the batches it is writing,
  // publishes them, and then writes no other, waiting for Stop(). Returns at once;
  // idempotent.
  void Drain();
  // True while the producer writes a batch into a slot (from taking the slot to
  // publishing it; it may write two at once); false for good once drained.
  bool filling() const { return filling_.load(); }
  // True once the producer thread has returned (destroying the Stream then waits for
  // nothing).
  bool producer_done() const { return producer_done_.load(std::memory_order_acquire); }

  uint64_t id() const { return id_; }
  int ring_fd() const { return ring_->fd(); }
  // The share group's memfd (the reader maps it read-only), -1 without a group.
  int shared_fd() const { return group_ ? group_->fd() : -1; }
  const std::shared_ptr<ShareGroup>& group() const { return group_; }
  size_t ring_bytes() const { return ring_->size(); }
  uint32_t slot_count() const { return ring_->slot_count(); }
  uint64_t slot_size() const { return ring_->slot_size(); }
  uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  uint64_t samples_per_epoch() const { return info_.count; }
  uint64_t fingerprint() const { return info_.fingerprint; }
  const StreamParams& params() const { return params_; }

  StreamStats Stats() const;

 private:
  Stream(uint64_t id, Env& env, JobCoordinator& coordinator, DatasetInfo info,
         DatasetCache::SourceFuture source, DecodePool* decode_pool, StreamParams params,
         uint64_t batches_per_epoch, std::unique_ptr<RingWriter> ring,
         std::shared_ptr<ShareGroup> group, RemoteDecoders* remote);
  void Run();
  Status Produce();
  // Starts decoding the lease's samples into the slot (on the decode pool if the source
  // decodes, else here and now).
  struct Filling;
  std::unique_ptr<Filling> StartFill(ring::SlotHeader* slot, BatchLease lease,
                                     const Source& source);
  // Starts decoding the batch's rows into its slot: parts go to remote decode workers
  // (SendToWorkers), the rest to this node's decode pool.
  void StartDecode(Filling& f, const Source& source);
  // Sends parts of the batch to the remote decode workers, if any are up, and sets
  // f.local_end; a part whose worker fails is decoded here.
  void SendToWorkers(Filling& f, const Source& source);
  // A worker's answer for rows [begin, end), which its channel read into the slot: notes
  // its failed rows; false if the call failed (the part is decoded here).
  bool TakeRemoteAnswer(Filling& f, uint64_t begin, uint64_t end,
                        const Result<RemoteAnswer>& got);
  // Decodes rows from `next` (claimed one at a time) below `end` into the slot.
  void ReadRows(Filling& f, const Source& source, std::atomic<uint64_t>& next, uint64_t end);
  // The batch's rows from the share group, pinned for its slot: false if the group does
  // not hold them all (the batch is decoded for this stream instead).
  bool TakeFromGroup(Filling& f);
  // Leases the next batch of `epoch` into `slot` and starts it; `epoch_done` becomes
  // whether it is the epoch's last. Gives the slot back on error.
  Status StartNext(ring::SlotHeader* slot, uint64_t epoch, const Source& source,
                   std::optional<BatchLease>& ahead, bool& epoch_done,
                   std::deque<std::unique_ptr<Filling>>& filling);
  // Waits for the batch and returns the rows written. A corrupt sample fails the batch,
  // or under on_error: skip is logged, counted and left out (the batch gets fewer rows).
  Result<uint64_t> FinishFill(Filling& filling);
  // This rank's next batch of `epoch` from the coordinator; kCancelled once stopped.
  Result<BatchLease> NextLease(uint64_t epoch);
  // Commits the batches whose slots the reader has handed back. kCancelled once stopped.
  Status CommitConsumed();
  // Publishes the filled slot of `rows` samples and records that it holds `lease`;
  // kCancelled once stopped (the batch is not published).
  Status Publish(ring::SlotHeader* slot, BatchLease lease, uint64_t rows);
  const uint64_t id_;
  Env& env_;
  JobCoordinator& coordinator_;
  const DatasetInfo info_;
  const std::vector<TensorSpec> tensors_;  // StreamTensors(info_, params_.sample_ids)
  const uint64_t row_bytes_;               // payload bytes of one sample, all tensors_
  DatasetCache::SourceFuture source_future_;
  DecodePool* const decode_pool_;
  const StreamParams params_;
  std::shared_ptr<StreamForecast> forecast_;  // sources hold it weakly
  const uint64_t batches_per_epoch_;
  std::unique_ptr<RingWriter> ring_;
  const std::shared_ptr<ShareGroup> group_;  // null without params_.share
  RemoteDecoders* const remote_;             // null: no remote decode workers
  double local_rate_ = 0;  // rows/s this node decodes a batch's part at (producer thread)
  std::atomic<uint64_t> remote_rows_{0};
  ShareGroup::MemberId member_ = 0;
  std::atomic<uint64_t> shared_batches_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> samples_skipped_{0};
  std::atomic<uint64_t> samples_published_{0};
  std::atomic<uint64_t> bytes_published_{0};
  std::atomic<uint64_t> decode_errors_{0};
  // The skips logged: 10 lines a second at most (the count in Stats has them all).
  LogBudget skip_log_{10, 1000000};
  // Logs how many skips skip_log_ held back, if any.
  void LogSkipsHeldBack(uint64_t held_back) const;

  std::atomic<bool> producer_done_{false};
  // Drain(): seq_cst with filling_, so that a batch is either seen as in flight by the
  // drainer or never started.
  std::atomic<bool> drain_{false};
  std::atomic<bool> filling_{false};

  // Orders the producer's coordinator calls and publishing against Stop(): once Stop() has
  // left the job, no batch is leased or published by this stream, and every batch it
  // committed was consumed. Never held across a call that waits for another daemon
  // (JobCoordinator::remote()), so that Stop() on the event loop returns at once.
  Mutex coordinator_mu_;
  bool left_job_ GUARDED_BY(coordinator_mu_) = false;
  // The lease whose batch sits in each slot, until committed.
  std::vector<std::optional<BatchLease>> in_slot_ GUARDED_BY(coordinator_mu_);

  mutable Mutex rate_mu_;
  uint64_t rate_window_start_us_ GUARDED_BY(rate_mu_) = 0;
  uint64_t rate_window_samples_ GUARDED_BY(rate_mu_) = 0;
  double samples_per_second_ GUARDED_BY(rate_mu_) = 0;

  std::thread producer_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_STREAM_STREAM_H_
