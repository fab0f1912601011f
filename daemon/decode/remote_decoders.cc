#include "daemon/decode/remote_decoders.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace ember::daemon {
namespace {

constexpr std::chrono::milliseconds kMaxRetryAfter{30000};
constexpr double kRateWeight = 0.3;  // of a new measurement in a worker's rate

using SteadyClock = std::chrono::steady_clock;

}  // namespace

struct RemoteDecoders::State {
  DecodeWorkerStats stats;
  std::deque<Call> calls;
  SteadyClock::time_point retry_at{};
  SteadyClock::time_point last_answer{};  // when its latest call ended
  std::chrono::milliseconds backoff{0};
};

RemoteDecoders::RemoteDecoders(std::vector<Worker> workers, RemoteDecodersOptions options)
    : workers_(std::move(workers)), options_(options) {
  {
    MutexLock lock(&mu_);
    states_.resize(workers_.size());
    for (size_t w = 0; w < workers_.size(); ++w) states_[w].stats.address = workers_[w].address;
  }
  for (size_t w = 0; w < workers_.size(); ++w)
    for (unsigned i = 0; i < std::max(1u, options_.in_flight); ++i)
      callers_.emplace_back([this, w] { CallerLoop(w); });
}

RemoteDecoders::~RemoteDecoders() {
  Shutdown();
  for (std::thread& t : callers_) t.join();
}

void RemoteDecoders::Shutdown() {
  std::vector<Call> dropped;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (State& s : states_)
      while (!s.calls.empty()) {
        dropped.push_back(std::move(s.calls.front()));
        s.calls.pop_front();
      }
  }
  queued_.SignalAll();
  for (const Worker& worker : workers_) worker.channel->Cancel();
  for (Call& call : dropped) call.done(Cancelled("emberd is shutting down"));
}

std::vector<RemoteDecoders::Part> RemoteDecoders::Split(uint64_t rows,
                                                        double local_rows_per_second,
                                                        uint64_t max_rows) {
  std::vector<Part> parts;
  if (rows < 2) return parts;
  MutexLock lock(&mu_);
  if (shut_down_) return parts;
  const auto now = SteadyClock::now();
  std::vector<std::pair<size_t, double>> up;
  double known = 0;
  for (size_t w = 0; w < states_.size(); ++w) {
    State& s = states_[w];
    if (!s.stats.up && now < s.retry_at) continue;
    up.emplace_back(w, s.stats.rows_per_second);
    known = std::max(known, s.stats.rows_per_second);
  }
  if (up.empty()) return parts;
  // Unknown rates count as the best known one, or as this node's.
  const double fallback = known > 0 ? known : (local_rows_per_second > 0 ? local_rows_per_second : 1);
  const double local = local_rows_per_second > 0 ? local_rows_per_second : fallback;
  double total = local;
  for (auto& [w, rate] : up) {
    if (rate <= 0) rate = fallback;
    total += rate;
  }
  uint64_t end = rows;
  for (const auto& [w, rate] : up) {
    // At least a row each, so that every worker's rate stays measured.
    uint64_t n = std::max<uint64_t>(
        1, static_cast<uint64_t>(std::llround(static_cast<double>(rows) * rate / total)));
    n = std::min<uint64_t>({n, end - 1, std::max<uint64_t>(1, std::min(max_rows, kMaxDecodeIds))});
    if (n == 0) continue;
    parts.push_back({w, end - n, end});
    end -= n;
  }
  return parts;
}

void RemoteDecoders::Send(size_t worker, DecodeRequest request, RowsDestination into,
                          Done done) {
  {
    MutexLock lock(&mu_);
    if (!shut_down_) {
      states_[worker].calls.push_back({std::move(request), std::move(into), std::move(done)});
      queued_.SignalAll();
      return;
    }
  }
  done(Cancelled("emberd is shutting down"));
}

void RemoteDecoders::CountLocal(uint64_t rows) {
  MutexLock lock(&mu_);
  local_rows_ += rows;
}

std::vector<DecodeWorkerStats> RemoteDecoders::Stats() const {
  MutexLock lock(&mu_);
  uint64_t all = local_rows_;
  for (const State& s : states_) all += s.stats.rows;
  std::vector<DecodeWorkerStats> stats;
  for (const State& s : states_) {
    stats.push_back(s.stats);
    stats.back().share = all == 0 ? 0 : static_cast<double>(s.stats.rows) / all;
  }
  return stats;
}

void RemoteDecoders::CallerLoop(size_t worker) {
  while (true) {
    Call call;
    {
      MutexLock lock(&mu_);
      while (!shut_down_ && states_[worker].calls.empty()) queued_.Wait(&mu_);
      if (shut_down_) return;
      call = std::move(states_[worker].calls.front());
      states_[worker].calls.pop_front();
    }
    const auto began = SteadyClock::now();
    Result<RemoteAnswer> answer = workers_[worker].channel->Decode(
        call.request, call.into, began + options_.call_timeout);
    if (answer.ok())
      Finished(worker, call.request.ids.size(), answer->bytes, began, Status::Ok());
    else
      Finished(worker, 0, 0, began, answer.status());
    call.done(std::move(answer));
  }
}

void RemoteDecoders::Finished(size_t worker, uint64_t rows, uint64_t bytes,
                              SteadyClock::time_point began, const Status& error) {
  const auto now = SteadyClock::now();
  MutexLock lock(&mu_);
  State& s = states_[worker];
  // The worker's time on this call: from its start, or from the end of the call before it
  // when they overlapped (the worker serves calls side by side or queued: the time between
  // answers is what one more call costs it, so rows over it is its throughput).
  const double seconds = std::chrono::duration<double>(now - std::max(began, s.last_answer)).count();
  s.last_answer = now;
  ++s.stats.calls;
  if (error.ok()) {
    s.stats.rows += rows;
    s.stats.bytes += bytes;
    if (!s.stats.up) spdlog::info("decode worker {} answers again", s.stats.address);
    s.stats.up = true;
    s.backoff = std::chrono::milliseconds(0);
    if (seconds > 0 && rows > 0) {
      const double rate = rows / seconds;
      s.stats.rows_per_second = s.stats.rows_per_second == 0
                                    ? rate
                                    : (1 - kRateWeight) * s.stats.rows_per_second + kRateWeight * rate;
    }
    return;
  }
  ++s.stats.failed_calls;
  s.stats.last_error = error.ToString();
  if (error.code() == StatusCode::kCancelled || shut_down_) return;  // nothing to retry
  // Calls that were in flight when it went down fail too: one failure, not several.
  if (!s.stats.up && SteadyClock::now() < s.retry_at) return;
  s.backoff = s.backoff.count() == 0 ? options_.retry_after
                                     : std::min(s.backoff * 2, kMaxRetryAfter);
  s.retry_at = SteadyClock::now() + s.backoff;
  if (s.stats.up)
    spdlog::warn("decode worker {}: {}; its rows are decoded here, trying it again in {} ms",
                 s.stats.address, error.ToString(), s.backoff.count());
  s.stats.up = false;
}

}  // namespace ember::daemon
