#include "daemon/decode/decode_lender.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "daemon/catalog/fingerprint.h"

namespace ember::daemon {

namespace {

using Clock = std::chrono::steady_clock;

// How often the load waiter looks at the loads requests wait for, and, with none waiting,
// at the held datasets.
constexpr auto kLoadPoll = std::chrono::milliseconds(10);
constexpr auto kHeldSweep = std::chrono::seconds(1);

bool Ready(const DatasetCache::SourceFuture& future) {
  return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

struct DecodeLender::Request {
  DecodeRequest request;
  DatasetInfo info;  // the catalog's
  Done done;
  std::shared_ptr<const Source> source;
  // Set by the first decoding task, before it posts the others.
  std::vector<uint64_t> sample_bytes;  // per tensor
  std::vector<uint64_t> offsets;       // per tensor: where its rows start in rows.bytes
  DecodedRows rows;
  std::vector<Status> errors;  // per row
  std::atomic<uint64_t> next_row{0};
  std::atomic<uint32_t> tasks{0};  // decoding tasks not yet finished

  std::string Name() const { return "dataset '" + info.spec.name + "'"; }
};

DecodeLender::DecodeLender(Catalog* catalog, SourceLoader load_source, DecodePool* pool,
                           DecodeLenderLimits limits)
    : catalog_(catalog),
      load_source_(std::move(load_source)),
      pool_(pool),
      limits_(limits),
      waiter_([this] { WaitForLoads(); }) {}

DecodeLender::~DecodeLender() {
  {
    MutexLock lock(&mu_);
    stopping_.store(true);
    changed_.SignalAll();
  }
  waiter_.join();
  MutexLock lock(&mu_);
  while (in_flight_ != 0) changed_.Wait(&mu_);
}

Result<DatasetInfo> DecodeLender::Check(const DecodeRequest& request) const {
  EMBER_RETURN_IF_ERROR(ValidateDatasetName(request.dataset).WithContext("dataset"));
  const std::string name = "dataset '" + request.dataset + "'";
  if (request.ids.empty())
    return InvalidArgument("ids: none (a decode request of " + name + " asks for 1.." +
                           std::to_string(kMaxDecodeIds) + " samples)");
  if (request.ids.size() > kMaxDecodeIds)
    return InvalidArgument("ids: " + std::to_string(request.ids.size()) + " samples of " + name +
                           ", at most " + std::to_string(kMaxDecodeIds) +
                           " in one decode request");
  Result<DatasetInfo> info = catalog_->Get(request.dataset);
  // The same answer for a dataset the caller may not read as for none: no oracle.
  if (!info.ok() || !MayRead(request.caller, *info)) return DatasetNotFound(request.dataset);
  if (request.fingerprint != 0 && request.fingerprint != info->fingerprint)
    return FailedPrecondition(
        "fingerprint: " + name + " has " +
        (info->fingerprint == 0 ? std::string("none here (registered before fingerprints: "
                                              "register it again)")
                                : FingerprintHex(info->fingerprint) + " here") +
        ", the calling node's copy has " + FingerprintHex(request.fingerprint) +
        " (the nodes' copies differ)");
  for (size_t i = 0; i < request.ids.size(); ++i)
    if (request.ids[i] >= info->count)
      return InvalidArgument("ids[" + std::to_string(i) + "]: " + std::to_string(request.ids[i]) +
                             " is not below the " + std::to_string(info->count) +
                             " samples of " + name);
  uint64_t per_sample = 0, bytes = 0;
  bool overflow = false;
  for (const TensorSpec& tensor : info->tensors)
    overflow |= __builtin_add_overflow(per_sample, tensor.SampleBytes(), &per_sample);
  overflow |= __builtin_mul_overflow(per_sample, uint64_t{request.ids.size()}, &bytes);
  if (overflow || bytes > limits_.max_bytes)
    return ResourceExhausted(
        "rows: " + std::to_string(request.ids.size()) + " samples of " + name + " are " +
        (overflow ? std::string("more than 2^64") : std::to_string(bytes)) +
        " bytes, more than the " + std::to_string(limits_.max_bytes) +
        " one decode request may take (ask for fewer)");
  return info;
}

void DecodeLender::Refuse(const Done& done, Status why) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  done(std::move(why));
}

void DecodeLender::Decode(DecodeRequest request, Done done, std::vector<uint8_t> buffer) {
  Result<DatasetInfo> info = Check(request);
  if (!info.ok()) return Refuse(done, info.status());
  uint32_t busy = 0;
  bool stopping = false;
  {
    MutexLock lock(&mu_);
    if (stopping_.load())
      stopping = true;
    else if (in_flight_ >= limits_.max_in_flight)
      busy = in_flight_;
    else
      ++in_flight_;
  }
  if (stopping) return Refuse(done, Unavailable("emberd is shutting down: no new decode requests"));
  if (busy != 0)
    return Refuse(done, ResourceExhausted(
                            "busy: " + std::to_string(busy) +
                            " decode requests for other nodes in flight here, at most " +
                            std::to_string(limits_.max_in_flight)));
  requests_.fetch_add(1, std::memory_order_relaxed);

  auto r = std::make_shared<Request>();
  r->request = std::move(request);
  r->info = std::move(info).value();
  r->done = std::move(done);
  r->rows.bytes = std::move(buffer);
  DatasetCache::SourceFuture future = load_source_(r->info);
  if (!future.valid()) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    return Finish(*r, Internal(r->Name() + ": no source to load"));
  }
  if (Ready(future)) {
    const Result<std::shared_ptr<const Source>>& loaded = future.get();
    if (!loaded.ok()) {
      failed_.fetch_add(1, std::memory_order_relaxed);
      return Finish(*r, loaded.status().WithContext(r->Name()));
    }
    return Start(std::move(r), *loaded);
  }
  {
    MutexLock lock(&mu_);
    if (!stopping_.load()) {
      waiting_.push_back({r, std::move(future), Clock::now() + limits_.load_timeout});
      changed_.SignalAll();
      return;
    }
  }
  failed_.fetch_add(1, std::memory_order_relaxed);
  Finish(*r, Cancelled("emberd is shutting down: " + r->Name() + " was still loading"));
}

void DecodeLender::Start(std::shared_ptr<Request> r, std::shared_ptr<const Source> source) {
  {
    MutexLock lock(&mu_);
    held_[r->info.spec.name] = {source, Clock::now()};
  }
  r->source = std::move(source);
  // The buffer and the other tasks from a pool thread, not the caller's.
  pool_->Post([this, r] {
    const std::vector<TensorSpec>& tensors = r->info.tensors;
    const uint64_t n = r->request.ids.size();
    uint64_t at = 0;
    for (const TensorSpec& tensor : tensors) {
      r->sample_bytes.push_back(tensor.SampleBytes());
      r->offsets.push_back(at);
      at += n * r->sample_bytes.back();
    }
    // Every byte is written below (a failed row's with zeros): a reused buffer keeps its
    // bytes, a larger one is zeroed only past them.
    r->rows.bytes.resize(at);
    r->errors.resize(n);
    r->source->Prefetch(r->request.ids.data(), n);
    const uint32_t tasks =
        r->source->ParallelDecode() ? static_cast<uint32_t>(std::min<uint64_t>(n, pool_->threads))
                                    : 1;
    r->tasks.store(tasks);
    for (uint32_t t = 1; t < tasks; ++t) pool_->Post([this, r] { DecodeRows(r); });
    DecodeRows(r);
  });
}

void DecodeLender::DecodeRows(const std::shared_ptr<Request>& r) {
  const SampleContext context{r->request.seed, r->request.epoch};
  const uint64_t n = r->request.ids.size();
  std::vector<void*> dsts(r->offsets.size());
  while (!stopping_.load(std::memory_order_relaxed)) {
    const uint64_t row = r->next_row.fetch_add(1, std::memory_order_relaxed);
    if (row >= n) break;
    for (size_t t = 0; t < dsts.size(); ++t)
      dsts[t] = r->rows.bytes.data() + r->offsets[t] + row * r->sample_bytes[t];
    r->errors[row] = r->source->ReadSample(r->request.ids[row], context, dsts.data());
  }
  if (r->tasks.fetch_sub(1, std::memory_order_acq_rel) != 1) return;

  // The last task: every row is written.
  if (stopping_.load()) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    return Finish(*r, Cancelled("emberd is shutting down: decoding of " + r->Name() +
                                " stopped"));
  }
  DecodedRows& rows = r->rows;
  for (uint64_t row = 0; row < n; ++row) {
    if (r->errors[row].ok()) continue;
    // A failed read may have written part of its rows.
    for (size_t t = 0; t < r->offsets.size(); ++t)
      std::memset(rows.bytes.data() + r->offsets[t] + row * r->sample_bytes[t], 0,
                  r->sample_bytes[t]);
    rows.failed.emplace_back(static_cast<uint32_t>(row),
                             r->errors[row].WithContext(r->Name() + " sample " +
                                                        std::to_string(r->request.ids[row])));
  }
  rows_.fetch_add(n, std::memory_order_relaxed);
  bytes_.fetch_add(rows.bytes.size(), std::memory_order_relaxed);
  failed_rows_.fetch_add(rows.failed.size(), std::memory_order_relaxed);
  Finish(*r, std::move(rows));
}

void DecodeLender::Finish(Request& r, Result<DecodedRows> answer) {
  Done done = std::move(r.done);
  {
    MutexLock lock(&mu_);
    --in_flight_;
    changed_.SignalAll();
  }
  // From here on the lender may be gone: only `done` runs.
  done(std::move(answer));
}

void DecodeLender::WaitForLoads() {
  MutexLock lock(&mu_);
  while (!stopping_.load()) {
    const Clock::time_point now = Clock::now();
    std::vector<Waiting> ready, expired;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (Ready(it->future)) {
        ready.push_back(std::move(*it));
      } else if (now >= it->deadline) {
        expired.push_back(std::move(*it));
      } else {
        ++it;
        continue;
      }
      it = waiting_.erase(it);
    }
    std::vector<std::shared_ptr<const Source>> idle;
    for (auto it = held_.begin(); it != held_.end();) {
      if (now - it->second.last_used >= limits_.hold_idle) {
        idle.push_back(std::move(it->second.source));
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
    if (ready.empty() && expired.empty() && idle.empty()) {
      if (!waiting_.empty())
        (void)changed_.WaitFor(&mu_, kLoadPoll);
      else if (!held_.empty())
        (void)changed_.WaitFor(&mu_, kHeldSweep);
      else
        changed_.Wait(&mu_);
      continue;
    }
    // Outside the lock: answers, and a dataset's last reference (which may unmap it).
    MutexUnlock unlocked(&mu_);
    idle.clear();
    for (Waiting& w : ready) {
      const Result<std::shared_ptr<const Source>> loaded = w.future.get();
      if (loaded.ok()) {
        Start(std::move(w.request), *loaded);
      } else {
        failed_.fetch_add(1, std::memory_order_relaxed);
        Finish(*w.request, loaded.status().WithContext(w.request->Name()));
      }
    }
    ready.clear();
    for (Waiting& w : expired) {
      failed_.fetch_add(1, std::memory_order_relaxed);
      Finish(*w.request,
             DeadlineExceeded(w.request->Name() + " did not load within " +
                              std::to_string(limits_.load_timeout.count()) + " ms here"));
    }
    expired.clear();
  }
  std::vector<Waiting> left;
  left.swap(waiting_);
  std::map<std::string, Held> held;
  held.swap(held_);
  MutexUnlock unlocked(&mu_);
  held.clear();
  for (Waiting& w : left) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    Finish(*w.request, Cancelled("emberd is shutting down: " + w.request->Name() +
                                 " was still loading"));
  }
  left.clear();
}

DecodeLender::Stats DecodeLender::stats() const {
  Stats s;
  s.requests = requests_.load(std::memory_order_relaxed);
  s.rows = rows_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.failed_rows = failed_rows_.load(std::memory_order_relaxed);
  s.refused = refused_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  MutexLock lock(&mu_);
  s.in_flight = in_flight_;
  return s;
}

}  // namespace ember::daemon
