#include "daemon/stream/stream.h"

#include <spdlog/spdlog.h>


#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <vector>

namespace ember::daemon {
namespace {

constexpr uint64_t kRateWindowUs = 2'000'000;
// The most bytes of rows one call to a remote decode worker brings back.
constexpr uint64_t kMaxRemoteBytes = 16ull << 20;

uint64_t RowBytes(const std::vector<TensorSpec>& tensors) {
  uint64_t bytes = 0;
  for (const TensorSpec& t : tensors) bytes += t.SampleBytes();
  return bytes;
}

// How the dataset's jobs shuffle: by shards when it was registered so.
ShuffleShape ShuffleShapeOf(const DatasetInfo& info) {
  if (info.spec.shuffle != "shards") return {};
  return ShuffleShape::ByShards(info.shard_starts, info.spec.shuffle_window);
}

}  // namespace

// A batch being decoded into its slot. Its decode tasks point into it: destroying it
// waits for them, and gives the slot back if it was not published.
struct Stream::Filling {
  RingWriter* ring = nullptr;
  ring::SlotHeader* slot = nullptr;  // null once published
  BatchLease lease;
  const Source* source = nullptr;
  // Served from the share group: its rows [group_begin, group_end), pinned for the slot
  // once taken.
  ShareGroup* group = nullptr;
  ShareGroup::MemberId member = 0;
  bool from_group = false;
  uint64_t group_begin = 0, group_end = 0;
  std::array<uint8_t*, ring::kMaxTensors> columns{};
  std::array<uint64_t, ring::kMaxTensors> sample_bytes{};
  // The rows go to whoever claims them next: a row at a time, so that no decode thread
  // sits idle at the batch's end while another still has a queue of rows (images take
  // from 0.1 to several ms each). A failed row's error goes into `errors[r]`; under
  // on_error: fail, it ends the batch for every thread.
  std::vector<Status> errors;
  std::atomic<uint64_t> next_row{0};
  // Rows [0, local_end) are decoded here; the rest went to remote decode workers.
  uint64_t local_end = 0;
  std::atomic<bool> failed{false};
  // When this node's own decode tasks of the batch began (the first one the pool ran, not
  // when they were queued behind the batch before) and ended: its rate, for the workers'
  // shares.
  std::atomic<int64_t> local_began_us{0};
  std::atomic<int64_t> local_ended_us{0};
  std::atomic<uint64_t> local_tasks{0};
  // Its decode tasks posted and not yet started: the pool's queue holds them, but they
  // find no row once the rows are claimed, so they do not keep the next batch waiting.
  std::atomic<uint64_t> unstarted{0};
  Mutex mu;
  CondVar done_cv;
  uint64_t pending GUARDED_BY(mu) = 0;      // decode tasks and remote parts not yet done
  bool rows_claimed GUARDED_BY(mu) = false;  // a task found no row left to claim

  // Work that writes into the slot (decode tasks, a remote worker's part): Wait() waits
  // for every piece added to end.
  void AddPending(uint64_t n) {
    MutexLock lock(&mu);
    pending += n;
  }
  void EndPending() {
    MutexLock lock(&mu);
    if (--pending == 0) done_cv.SignalAll();
  }

  void Wait() {
    MutexLock lock(&mu);
    while (pending != 0) done_cv.Wait(&mu);
  }
  // Until a decode thread is out of rows (or all are done).
  void WaitUntilRowsClaimed() {
    MutexLock lock(&mu);
    while (!rows_claimed && pending != 0) done_cv.Wait(&mu);
  }
  ~Filling() {
    Wait();
    if (slot == nullptr) return;
    if (group != nullptr) group->Unpin(member, ring->IndexOf(slot));
    ring->Abandon(slot);
  }
};

uint64_t BatchPayloadBytes(const std::vector<TensorSpec>& tensors, uint32_t batch_size) {
  uint64_t bytes = 0;
  for (const TensorSpec& t : tensors)
    bytes += ring::AlignUp(t.SampleBytes() * batch_size, ring::kCacheLine);
  return bytes;
}

std::vector<TensorSpec> StreamTensors(const DatasetInfo& info, bool sample_ids) {
  std::vector<TensorSpec> tensors = info.tensors;
  if (sample_ids) tensors.push_back(TensorSpec{"sample_id", ring::DType::kInt64, {}});
  return tensors;
}

Result<std::unique_ptr<Stream>> Stream::Start(uint64_t id, Env& env, JobCoordinator& coordinator,
                                              const DatasetInfo& info,
                                              DatasetCache::SourceFuture source,
                                              DecodePool* decode_pool,
                                              const StreamParams& asked,
                                              std::shared_ptr<ShareGroup> group,
                                              RemoteDecoders* remote) {
  StreamParams params = asked;
  if (group != nullptr && !params.rejoin && params.start_epoch == 0 && params.start_position == 0) {
    // A job that joins the group after it wrote over the order's first rows starts at the
    // group's next epoch (it would miss the rows decoded before it came).
    const uint64_t start = group->StartEpochFor(params.job);
    params.start_epoch = static_cast<uint32_t>(start);
    if (params.epochs != 0) params.epochs += static_cast<uint32_t>(start);
  }
  const std::vector<TensorSpec> tensors = StreamTensors(info, params.sample_ids);
  if (info.tensors.empty() || tensors.size() > ring::kMaxTensors)
    return InvalidArgument("dataset '" + info.spec.name + "' has " +
                           std::to_string(info.tensors.size()) + " tensors per sample (1.." +
                           std::to_string(ring::kMaxTensors) + " supported" +
                           (params.sample_ids ? ", one less with sample ids" : "") + ")");
  for (const TensorSpec& t : info.tensors)
    if (t.shape.size() + 1 > ring::kMaxDims)
      return InvalidArgument("dataset '" + info.spec.name + "': tensor '" + t.name +
                             "' has too many dimensions");
  JobParams job_params;
  job_params.dataset = info.spec.name;
  job_params.num_samples = info.count;
  job_params.batch_size = params.batch_size;
  job_params.world_size = params.world_size;
  job_params.seed = params.seed;
  job_params.shuffle = params.shuffle;
  job_params.shuffle_shape = ShuffleShapeOf(info);
  job_params.start_epoch = params.start_epoch;
  job_params.start_position = params.start_position;
  job_params.fingerprint = info.fingerprint;
  job_params.owner = params.owner;
  std::vector<HeldBatch> held;
  if (params.rejoin)
    for (uint64_t b = 0; b < params.rejoin_received; ++b)
      held.push_back({params.rejoin_epoch, b, /*consumed=*/true});
  EMBER_RETURN_IF_ERROR(coordinator.Join(params.job, params.rank, job_params, held));
  auto batches = coordinator.BatchesPerRank(params.job);
  if (!batches.ok()) {
    coordinator.Leave(params.job, params.rank);
    return batches.status();
  }
  const std::string ring_name = "ember-" + params.job + "-r" + std::to_string(params.rank);
  auto ring = RingWriter::Create(env, ring_name, params.slots,
                                 BatchPayloadBytes(tensors, params.batch_size), *batches);
  if (!ring.ok()) {
    coordinator.Leave(params.job, params.rank);
    return ring.status();
  }
  if (group != nullptr) (*ring)->SetSharedRegions(group->regions());
  std::unique_ptr<Stream> stream(new Stream(id, env, coordinator, info, std::move(source),
                                            decode_pool, params, *batches,
                                            std::move(ring).value(), std::move(group), remote));
  stream->forecast_ = std::make_shared<StreamForecast>(job_params, params.rank, params.epochs);
  stream->producer_ = std::thread([s = stream.get()] { s->Run(); });
  return stream;
}

Stream::Stream(uint64_t id, Env& env, JobCoordinator& coordinator, DatasetInfo info,
               DatasetCache::SourceFuture source, DecodePool* decode_pool, StreamParams params,
               uint64_t batches_per_epoch, std::unique_ptr<RingWriter> ring,
               std::shared_ptr<ShareGroup> group, RemoteDecoders* remote)
    : id_(id),
      env_(env),
      coordinator_(coordinator),
      info_(std::move(info)),
      tensors_(StreamTensors(info_, params.sample_ids)),
      row_bytes_(RowBytes(tensors_)),
      source_future_(std::move(source)),
      decode_pool_(decode_pool),
      params_(std::move(params)),
      batches_per_epoch_(batches_per_epoch),
      ring_(std::move(ring)),
      group_(std::move(group)),
      remote_(remote),
      epoch_(params_.start_epoch),
      in_slot_(ring_->slot_count()) {
  if (group_ != nullptr) {
    // Its first row: at or after its start (ranks past 0 start later in the first step).
    const uint64_t start_epoch = params_.rejoin ? params_.rejoin_epoch : params_.start_epoch;
    const uint64_t first_row =
        start_epoch * info_.count +
        (params_.rejoin || start_epoch != params_.start_epoch ? 0 : params_.start_position);
    member_ = group_->Join(ring_.get(), first_row, uint64_t{params_.epochs} * info_.count);
  }
}

Stream::~Stream() {
  Stop();
  if (producer_.joinable()) producer_.join();
  // A reader still attached (the stream was closed, or the daemon is shutting down)
  // learns why no more batches come. After a completed stream this lands behind the end
  // marker and is never read.
  if (ring::SlotHeader* slot = ring_->TryAcquire())
    ring_->PublishEnd(slot, ring::kEndCancelled, "emberd closed the stream (shutting down?)");
}

void Stream::Stop() {
  stop_.store(true, std::memory_order_release);
  ring_->Wake();
  if (group_ != nullptr) group_->Leave(member_);
  MutexLock lock(&coordinator_mu_);
  if (left_job_) return;
  left_job_ = true;
  // Commit the batches whose slots the reader handed back; Leave returns the others.
  for (uint32_t i = 0; i < in_slot_.size(); ++i) {
    if (in_slot_[i] && ring_->SlotFree(i))
      (void)coordinator_.Commit(params_.job, params_.rank, in_slot_[i]->epoch, in_slot_[i]->batch);
    in_slot_[i].reset();
  }
  coordinator_.Leave(params_.job, params_.rank);
}

void Stream::Run() {
  Status status = Produce();
  filling_.store(false);  // also when the batch in progress failed
  LogSkipsHeldBack(skip_log_.TakeHeldBack());
  ring::SlotHeader* slot = stop_.load() ? nullptr : ring_->Acquire(stop_);
  if (slot != nullptr && CommitConsumed().ok()) {
    if (status.ok()) {
      ring_->PublishEnd(slot, ring::kEndComplete, "");
      spdlog::info("stream {} (job '{}' rank {}): all epochs delivered", id_, params_.job,
                   params_.rank);
    } else {
      ring_->PublishEnd(slot, ring::kEndError, status.message());
      spdlog::error("stream {} (job '{}' rank {}): {}", id_, params_.job, params_.rank,
                    status.ToString());
    }
  }
  producer_done_.store(true, std::memory_order_release);
}

Status Stream::Produce() {
  // Wait for the dataset to load, waking regularly to notice a stop.
  while (source_future_.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
    if (stop_.load()) return Cancelled("stream closed");
  const Result<std::shared_ptr<const Source>>& loaded = source_future_.get();
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<const Source> source = *loaded;
  source_future_ = DatasetCache::SourceFuture();  // keep only the shared_ptr
  source->Follow(forecast_);  // what this rank reads next (sources of remote data use it)
  if (group_ != nullptr) group_->SetSource(source);

  // Batches being decoded, oldest first: at most two. When a decode thread runs out of
  // the current batch's rows and nothing else waits for the pool (no other stream's
  // batch; its own tasks not yet started find no row), the next batch starts at once if
  // the depth leaves a slot for it, so that the pool does not idle while the last rows
  // finish and the producer publishes. Declared after `source`, so that the decode tasks
  // end before it goes.
  std::deque<std::unique_ptr<Filling>> filling;
  const bool overlap = decode_pool_ != nullptr && source->ParallelDecode() && group_ == nullptr;
  const size_t overlap_depth = remote_ != nullptr && remote_->size() > 0 ? 3 : 2;
  std::optional<BatchLease> ahead;  // the next batch, leased early for prefetching
  for (uint64_t epoch = params_.rejoin ? params_.rejoin_epoch : params_.start_epoch;
       params_.epochs == 0 || epoch < params_.epochs; ++epoch) {
    epoch_.store(epoch, std::memory_order_relaxed);
    for (bool epoch_done = false; !epoch_done || !filling.empty();) {
      if (filling.empty()) {
        ring::SlotHeader* slot = ring_->Acquire(stop_);
        if (slot == nullptr) return Cancelled("stream closed");
        filling_.store(true);
        if (drain_.load()) {
          ring_->Abandon(slot);
          filling_.store(false);
          while (!stop_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return Cancelled("stream closed");
        }
        EMBER_RETURN_IF_ERROR(StartNext(slot, epoch, *source, ahead, epoch_done, filling));
      }
      // The next batch starts once this one's local rows are all claimed, so the pool
      // never idles between batches; with remote workers one more, so that they always
      // have a part to decode while this node waits for the oldest batch's.
      while (overlap && filling.size() < overlap_depth && !epoch_done) {
        filling.back()->WaitUntilRowsClaimed();
        if (decode_pool_->queued.load(std::memory_order_relaxed) >
                filling.back()->unstarted.load(std::memory_order_relaxed) ||
            drain_.load())
          break;
        ring::SlotHeader* slot = ring_->TryAcquireWithinDepth();
        if (slot == nullptr) break;
        EMBER_RETURN_IF_ERROR(StartNext(slot, epoch, *source, ahead, epoch_done, filling));
      }
      std::unique_ptr<Filling> oldest = std::move(filling.front());
      filling.pop_front();
      EMBER_ASSIGN_OR_RETURN(const uint64_t rows, FinishFill(*oldest));
      const uint64_t samples = oldest->lease.sample_ids.size();
      Status published = Publish(oldest->slot, std::move(oldest->lease), rows);
      if (published.ok()) oldest->slot = nullptr;  // else it goes back with `oldest`
      if (filling.empty()) filling_.store(false);
      EMBER_RETURN_IF_ERROR(published);

      MutexLock lock(&rate_mu_);
      const uint64_t now = env_.NowMicros();
      if (rate_window_start_us_ == 0) rate_window_start_us_ = now;
      rate_window_samples_ += samples;
      if (now - rate_window_start_us_ >= kRateWindowUs) {
        samples_per_second_ = rate_window_samples_ * 1e6 / (now - rate_window_start_us_);
        rate_window_start_us_ = now;
        rate_window_samples_ = 0;
      }
    }
  }
  return Status::Ok();
}

Status Stream::StartNext(ring::SlotHeader* slot, uint64_t epoch, const Source& source,
                         std::optional<BatchLease>& ahead, bool& epoch_done,
                         std::deque<std::unique_ptr<Filling>>& filling) {
  Status committed = CommitConsumed();
  if (!committed.ok()) {
    ring_->Abandon(slot);
    return committed;
  }
  Result<BatchLease> lease = ahead ? Result<BatchLease>(std::move(*ahead)) : NextLease(epoch);
  ahead.reset();
  if (!lease.ok()) {
    ring_->Abandon(slot);
    return lease.status();
  }
  epoch_done = lease->last_in_epoch;
  forecast_->Advance(lease->epoch, lease->batch);
  if (!source.ParallelDecode()) source.Prefetch(lease->sample_ids.data(), lease->sample_ids.size());
  const bool lease_ahead = source.ParallelDecode() && !epoch_done && group_ == nullptr;
  filling.push_back(StartFill(slot, std::move(lease).value(), source));
  if (lease_ahead) {
    // Lease the next batch now so the source can start reading its files while this one
    // decodes (after this one's decode tasks are out: opening a batch of files takes the
    // folder format a while, and the pool would wait for it).
    Result<BatchLease> next = NextLease(epoch);
    if (!next.ok()) return next.status();
    source.Prefetch(next->sample_ids.data(), next->sample_ids.size());
    ahead = std::move(next).value();
  }
  return Status::Ok();
}

void Stream::Drain() { drain_.store(true); }

std::unique_ptr<Stream::Filling> Stream::StartFill(ring::SlotHeader* slot, BatchLease lease,
                                                   const Source& source) {
  auto f = std::make_unique<Filling>();
  f->ring = ring_.get();
  f->slot = slot;
  f->lease = std::move(lease);
  f->source = &source;
  uint8_t* base = ring_->SlotBase(slot);
  const uint64_t rows = f->lease.sample_ids.size();
  uint64_t offset = ring_->payload_offset();
  slot->num_tensors = static_cast<uint32_t>(tensors_.size());
  slot->num_samples = static_cast<uint32_t>(rows);
  slot->epoch = f->lease.epoch;
  slot->index_in_epoch = f->lease.index_in_epoch;
  slot->last_in_epoch = f->lease.last_in_epoch ? 1 : 0;
  slot->position = f->lease.step_end;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const TensorSpec& spec = tensors_[t];
    f->sample_bytes[t] = spec.SampleBytes();
    ring::TensorDesc& desc = slot->tensors[t];
    std::memset(desc.name, 0, sizeof(desc.name));
    std::strncpy(desc.name, spec.name.c_str(), sizeof(desc.name) - 1);
    desc.dtype = static_cast<uint32_t>(spec.dtype);
    desc.ndim = static_cast<uint32_t>(spec.shape.size() + 1);
    desc.shape[0] = static_cast<int64_t>(rows);
    for (size_t k = 0; k < spec.shape.size(); ++k) desc.shape[k + 1] = spec.shape[k];
    desc.offset = offset;
    desc.region = 0;
    desc.nbytes = f->sample_bytes[t] * rows;
    f->columns[t] = base + offset;
    offset += ring::AlignUp(desc.nbytes, ring::kCacheLine);
  }
  f->errors.resize(rows);
  if (group_ != nullptr) {
    group_->Unpin(member_, ring_->IndexOf(slot));  // the slot's last batch is read
    const PositionRange& positions = f->lease.positions;
    if (positions.end - positions.begin == rows && rows > 0) {
      f->group = group_.get();
      f->member = member_;
      f->from_group = true;
      f->group_begin = f->lease.epoch * info_.count + positions.begin;
      f->group_end = f->group_begin + rows;
      group_->Want(member_, f->group_begin, f->group_end);
      return f;
    }
  }
  StartDecode(*f, source);
  return f;
}

void Stream::ReadRows(Filling& f, const Source& source, std::atomic<uint64_t>& next,
                      uint64_t end) {
  const SampleContext context{params_.seed, f.lease.epoch};
  const bool skip_bad = info_.spec.on_error == "skip";
  std::array<void*, ring::kMaxTensors> dsts{};
  while (!stop_.load(std::memory_order_relaxed) && !f.failed.load(std::memory_order_relaxed)) {
    const uint64_t r = next.fetch_add(1, std::memory_order_relaxed);
    if (r >= end) return;
    for (size_t t = 0; t < info_.tensors.size(); ++t)
      dsts[t] = f.columns[t] + r * f.sample_bytes[t];
    f.errors[r] = source.ReadSample(f.lease.sample_ids[r], context, dsts.data());
    if (!f.errors[r].ok() && !skip_bad) f.failed.store(true, std::memory_order_relaxed);
  }
}

void Stream::SendToWorkers(Filling& filling, const Source& source) {
  Filling* f = &filling;
  const uint64_t rows = f->lease.sample_ids.size();
  f->local_end = rows;
  if (remote_ == nullptr || decode_pool_ == nullptr || !source.ParallelDecode()) return;
  // Answers of at most kMaxRemoteBytes (row_bytes_ covers the sample id too: a bound).
  const std::vector<RemoteDecoders::Part> parts =
      remote_->Split(rows, local_rate_, std::max<uint64_t>(1, kMaxRemoteBytes / row_bytes_));
  if (parts.empty()) return;
  f->local_end = parts.back().begin;
  for (const RemoteDecoders::Part& part : parts) {
    DecodeRequest request;
    request.dataset = info_.spec.name;
    request.fingerprint = info_.fingerprint;
    request.seed = params_.seed;
    request.epoch = f->lease.epoch;
    request.ids.assign(f->lease.sample_ids.begin() + part.begin,
                       f->lease.sample_ids.begin() + part.end);
    request.caller = params_.owner;
    RowsDestination into;
    for (size_t t = 0; t < info_.tensors.size(); ++t) {
      into.tensors.push_back(f->columns[t] + part.begin * f->sample_bytes[t]);
      into.row_bytes.push_back(f->sample_bytes[t]);
    }
    f->AddPending(1);
    remote_->Send(part.worker, std::move(request), std::move(into),
                  [this, f, &source, part](Result<RemoteAnswer> got) {
                    if (!TakeRemoteAnswer(*f, part.begin, part.end, got)) {
                      // Decoded here instead, over the pool, over whatever part of the
                      // rows the failed call wrote.
                      auto next = std::make_shared<std::atomic<uint64_t>>(part.begin);
                      const uint64_t tasks =
                          std::min<uint64_t>(part.end - part.begin, decode_pool_->threads);
                      f->AddPending(tasks);
                      for (uint64_t c = 0; c < tasks; ++c)
                        decode_pool_->Post([this, f, &source, next, end = part.end] {
                          ReadRows(*f, source, *next, end);
                          f->EndPending();
                        });
                    }
                    f->EndPending();
                  });
  }
}

bool Stream::TakeRemoteAnswer(Filling& f, uint64_t begin, uint64_t end,
                              const Result<RemoteAnswer>& got) {
  if (!got.ok()) return false;
  const uint64_t n = end - begin;
  for (const auto& [row, error] : got->failed) {
    if (row >= n) continue;
    f.errors[begin + row] = error;
    if (info_.spec.on_error != "skip") f.failed.store(true, std::memory_order_relaxed);
  }
  remote_rows_.fetch_add(n, std::memory_order_relaxed);
  return true;
}

void Stream::StartDecode(Filling& filling, const Source& source) {
  Filling* f = &filling;
  f->local_began_us.store(static_cast<int64_t>(env_.NowMicros()));
  SendToWorkers(filling, source);
  const uint64_t rows = f->local_end;
  // Decodes rows straight into the slot until none is left. A stop ends it too, so that a
  // slow source delays closing by one sample, not a batch.
  auto read_rows = [this, &source, f] {
    ReadRows(*f, source, f->next_row, f->local_end);
    if (f->next_row.load(std::memory_order_relaxed) < f->local_end) return;  // stopped, failed
    MutexLock lock(&f->mu);
    if (!f->rows_claimed) {
      f->rows_claimed = true;
      f->done_cv.SignalAll();
    }
  };
  if (decode_pool_ == nullptr || !source.ParallelDecode() || rows < 2) {
    read_rows();
    f->local_ended_us.store(static_cast<int64_t>(env_.NowMicros()));
    return;
  }
  // One task per decode thread; FinishFill waits for all of them.
  const uint64_t tasks = std::min<uint64_t>(rows, decode_pool_->threads);
  f->AddPending(tasks);
  f->unstarted.store(tasks, std::memory_order_relaxed);
  f->local_tasks.store(tasks, std::memory_order_relaxed);
  for (uint64_t c = 0; c < tasks; ++c) {
    decode_pool_->Post([this, read_rows, f, tasks] {
      if (f->unstarted.fetch_sub(1, std::memory_order_relaxed) == tasks)
        f->local_began_us.store(static_cast<int64_t>(env_.NowMicros()));
      read_rows();
      if (f->local_tasks.fetch_sub(1, std::memory_order_acq_rel) == 1)
        f->local_ended_us.store(static_cast<int64_t>(env_.NowMicros()));
      f->EndPending();
    });
  }
}

bool Stream::TakeFromGroup(Filling& f) {
  const uint32_t index = ring_->IndexOf(f.slot);
  const std::optional<uint64_t> first =
      group_->Take(member_, index, f.group_begin, f.group_end, stop_);
  if (!first) return false;
  const uint64_t rows = f.group_end - f.group_begin;
  const uint64_t capacity = group_->capacity();
  for (size_t t = 0; t < info_.tensors.size(); ++t) {
    const uint64_t row_bytes = f.sample_bytes[t];
    if (const uint32_t region = group_->RegionOf(t); region != 0) {
      ring::TensorDesc& desc = f.slot->tensors[t];
      desc.region = region;
      desc.offset = *first * row_bytes;
      continue;
    }
    for (uint64_t r = 0; r < rows; ++r)
      std::memcpy(f.columns[t] + r * row_bytes, group_->Row(t, (*first + r) % capacity), row_bytes);
  }
  return true;
}

Result<uint64_t> Stream::FinishFill(Filling& f) {
  if (f.from_group) {
    if (TakeFromGroup(f)) {
      shared_batches_.fetch_add(1, std::memory_order_relaxed);
    } else {
      f.from_group = false;  // decoded here, with the same bytes
      StartDecode(f, *f.source);
    }
  }
  f.Wait();
  if (remote_ != nullptr && !f.from_group) {
    // This node's rate over its part of the batch: the workers' shares follow from it.
    const int64_t took = f.local_ended_us.load() - f.local_began_us.load();
    if (f.local_end > 0 && took > 0) {
      const double rate = f.local_end * 1e6 / static_cast<double>(took);
      local_rate_ = local_rate_ == 0 ? rate : 0.7 * local_rate_ + 0.3 * rate;
    }
    remote_->CountLocal(f.local_end);
  }
  ring::SlotHeader* slot = f.slot;
  const BatchLease& lease = f.lease;
  const std::vector<Status>& errors = f.errors;
  const auto& columns = f.columns;
  const auto& sample_bytes = f.sample_bytes;
  const uint64_t rows = lease.sample_ids.size();
  const bool skip_bad = info_.spec.on_error == "skip";
  if (stop_.load()) return Cancelled("stream closed");
  if (params_.sample_ids) {
    auto* ids = reinterpret_cast<int64_t*>(columns[tensors_.size() - 1]);
    for (uint64_t r = 0; r < rows; ++r) ids[r] = static_cast<int64_t>(lease.sample_ids[r]);
  }

  uint64_t good = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    if (errors[r].ok()) {
      // Under skip, close the gaps left by bad rows, keeping the batch's order.
      if (good != r)
        for (size_t t = 0; t < tensors_.size(); ++t)
          std::memmove(columns[t] + good * sample_bytes[t], columns[t] + r * sample_bytes[t],
                       sample_bytes[t]);
      ++good;
      continue;
    }
    Status error = errors[r].WithContext("dataset '" + info_.spec.name + "' sample " +
                                         std::to_string(lease.sample_ids[r]));
    decode_errors_.fetch_add(1, std::memory_order_relaxed);
    if (!skip_bad) return error;
    samples_skipped_.fetch_add(1, std::memory_order_relaxed);
    uint64_t held_back = 0;
    if (!skip_log_.Allow(env_.NowMicros(), &held_back)) continue;
    LogSkipsHeldBack(held_back);
    spdlog::warn("stream {} (job '{}' rank {}): skipped {}", id_, params_.job, params_.rank,
                 error.message());
  }
  if (good != rows) {
    slot->num_samples = static_cast<uint32_t>(good);
    for (size_t t = 0; t < tensors_.size(); ++t) {
      slot->tensors[t].shape[0] = static_cast<int64_t>(good);
      slot->tensors[t].nbytes = sample_bytes[t] * good;
    }
  }
  return good;
}

void Stream::LogSkipsHeldBack(uint64_t held_back) const {
  if (held_back == 0) return;
  spdlog::warn("stream {} (job '{}' rank {}): {} more samples skipped, not logged one by one",
               id_, params_.job, params_.rank, held_back);
}

Result<BatchLease> Stream::NextLease(uint64_t epoch) {
  MutexLock lock(&coordinator_mu_);
  if (left_job_) return Cancelled("stream closed");
  Result<BatchLease> lease = Internal("unset");
  if (coordinator_.remote()) {
    // The answer may take the coordinator's deadline, and Stop() may come meanwhile on
    // the loop the call waits for. A lease answered after Stop() left the job went back
    // with the membership it was granted to.
    {
      MutexUnlock unlocked(&coordinator_mu_);
      lease = coordinator_.Next(params_.job, params_.rank, epoch);
    }
    if (left_job_) return Cancelled("stream closed");
  } else {
    lease = coordinator_.Next(params_.job, params_.rank, epoch);
  }
  if (!lease.ok()) return lease.status().WithContext("job '" + params_.job + "'");
  return lease;
}

Status Stream::CommitConsumed() {
  // The batches handed back, committed without coordinator_mu_ (a remote coordinator's Commit
  // waits for its loop, where Stop() may be waiting for the lock). They stay in in_slot_
  // until committed, so that a Stop() meanwhile commits them too (commits are idempotent)
  // before it leaves the job.
  struct Consumed {
    uint32_t slot;
    uint64_t epoch, batch;
  };
  std::vector<Consumed> consumed;
  {
    MutexLock lock(&coordinator_mu_);
    if (left_job_) return Cancelled("stream closed");
    for (uint32_t i = 0; i < in_slot_.size(); ++i)
      if (in_slot_[i] && ring_->SlotFree(i))
        consumed.push_back({i, in_slot_[i]->epoch, in_slot_[i]->batch});
  }
  for (const Consumed& c : consumed)
    (void)coordinator_.Commit(params_.job, params_.rank, c.epoch, c.batch);
  MutexLock lock(&coordinator_mu_);
  if (left_job_) return Cancelled("stream closed");
  for (const Consumed& c : consumed) in_slot_[c.slot].reset();
  return Status::Ok();
}

Status Stream::Publish(ring::SlotHeader* slot, BatchLease lease, uint64_t rows) {
  MutexLock lock(&coordinator_mu_);
  if (left_job_) return Cancelled("stream closed");
  if (group_ != nullptr) group_->Published(member_, ring_->IndexOf(slot));
  in_slot_[ring_->IndexOf(slot)] = std::move(lease);
  // Counted before the reader can see the batch, so that its stats never lag behind it.
  samples_published_.fetch_add(rows, std::memory_order_relaxed);
  bytes_published_.fetch_add(rows * row_bytes_, std::memory_order_relaxed);
  ring_->Publish(slot);
  return Status::Ok();
}

StreamStats Stream::Stats() const {
  StreamStats stats;
  stats.id = id_;
  stats.params = params_;
  stats.epoch = epoch_.load(std::memory_order_relaxed);
  stats.batches_published = ring_->published();
  stats.batches_consumed = ring_->consumed();
  stats.slot_count = ring_->slot_count();
  stats.prefetch_depth = ring_->depth();
  stats.slots_touched = ring_->slots_touched();
  const uint64_t unread = stats.batches_published > stats.batches_consumed
                              ? stats.batches_published - stats.batches_consumed
                              : 0;
  stats.ring_fill = static_cast<double>(unread) / stats.slot_count;
  stats.samples_skipped = samples_skipped_.load(std::memory_order_relaxed);
  stats.samples_published = samples_published_.load(std::memory_order_relaxed);
  stats.bytes_published = bytes_published_.load(std::memory_order_relaxed);
  stats.decode_errors = decode_errors_.load(std::memory_order_relaxed);
  stats.data_stall_seconds = ring_->reader_wait_nanos() / 1e9;
  stats.shared_batches = shared_batches_.load(std::memory_order_relaxed);
  stats.remote_rows = remote_rows_.load(std::memory_order_relaxed);
  MutexLock lock(&rate_mu_);
  stats.samples_per_second = samples_per_second_;
  return stats;
}

}  // namespace ember::daemon
