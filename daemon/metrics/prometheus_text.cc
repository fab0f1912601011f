#include "daemon/metrics/prometheus_text.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace ember::daemon {
namespace {

using Value = std::variant<uint64_t, double>;
using Labels = std::vector<std::pair<const char*, std::string>>;

std::string FormatValue(const Value& value) {
  if (const uint64_t* u = std::get_if<uint64_t>(&value)) return std::to_string(*u);
  const double d = std::get<double>(value);
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), d);
  return std::string(buffer, end);
}

// One family of samples for each item of a list (streams, jobs): a value, or none for an
// item it does not apply to.
template <typename T>
struct Family {
  const char* name;
  const char* type;  // "counter" or "gauge"
  const char* help;
  std::function<std::optional<Value>(const T&)> value;
};

class Writer {
 public:
  void Header(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP ") + name + " " + help + "\n";
    out_ += std::string("# TYPE ") + name + " " + type + "\n";
  }

  void Sample(const char* name, const Labels& labels, const Value& value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += "{";
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i > 0) out_ += ",";
        out_ += std::string(labels[i].first) + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
      }
      out_ += "}";
    }
    out_ += " " + FormatValue(value) + "\n";
  }

  // Every family, each with one sample per item of `items` it has a value for.
  template <typename T>
  void Families(const std::vector<Family<T>>& families, const std::vector<T>& items,
                const std::function<Labels(const T&)>& labels_of) {
    for (const Family<T>& family : families) {
      Header(family.name, family.type, family.help);
      for (const T& item : items)
        if (std::optional<Value> value = family.value(item))
          Sample(family.name, labels_of(item), *value);
    }
  }

  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

Labels StreamLabels(const StreamStatus& s, const MetricNames& names) {
  return {{"stream", std::to_string(s.stream_id)},
          {"job", LabelName(s.job, names)},
          {"rank", std::to_string(s.rank)},
          {"dataset", LabelName(s.dataset, names)}};
}

Labels JobLabels(const JobStatus& j, const MetricNames& names) {
  return {{"job", LabelName(j.job, names)},
          {"dataset", LabelName(j.dataset, names)},
          {"coordinator", j.coordinator.empty() ? "local" : j.coordinator}};
}

// The joined rank with the lowest (epoch, consumed); null if none is joined.
const RankProgress* SlowestRank(const JobStatus& job) {
  const RankProgress* slowest = nullptr;
  for (const RankProgress& r : job.ranks)
    if (r.joined && (slowest == nullptr || std::tie(r.epoch, r.consumed) <
                                               std::tie(slowest->epoch, slowest->consumed)))
      slowest = &r;
  return slowest;
}

// Batches the slowest joined rank is behind the fastest one (0 with one rank joined).
uint64_t BehindBatches(const JobStatus& job, const RankProgress& slowest) {
  const auto position = [&job](const RankProgress& r) {
    return r.epoch * job.batches_per_rank + r.consumed;
  };
  uint64_t fastest = position(slowest);
  for (const RankProgress& r : job.ranks)
    if (r.joined) fastest = std::max(fastest, position(r));
  return fastest - position(slowest);
}

const std::vector<Family<StreamStatus>>& StreamFamilies() {
  using S = StreamStatus;
  static const std::vector<Family<S>> families = {
      {"ember_stream_samples_total", "counter", "Samples in the batches the stream published.",
       [](const S& s) { return Value(s.samples_published); }},
      {"ember_stream_bytes_total", "counter",
       "Payload bytes (tensor data) in the batches the stream published.",
       [](const S& s) { return Value(s.bytes_published); }},
      {"ember_stream_batches_published_total", "counter",
       "Batches the daemon published into the stream's ring.",
       [](const S& s) { return Value(s.batches_published); }},
      {"ember_stream_batches_consumed_total", "counter",
       "Batches the trainer took from the stream's ring.",
       [](const S& s) { return Value(s.batches_consumed); }},
      {"ember_stream_decode_errors_total", "counter",
       "Samples that failed to read or decode (skipped, or ending the stream).",
       [](const S& s) { return Value(s.decode_errors); }},
      {"ember_stream_skipped_total", "counter",
       "Corrupt samples left out of their batch (dataset on_error: skip).",
       [](const S& s) { return Value(s.samples_skipped); }},
      {"ember_stream_data_stall_seconds_total", "counter",
       "Seconds the trainer waited for a batch that was not ready (as its SDK reports).",
       [](const S& s) { return Value(s.data_stall_seconds); }},
      {"ember_stream_ring_fill_ratio", "gauge",
       "Fraction of the ring's slots holding batches the trainer has not taken yet.",
       [](const S& s) { return Value(s.ring_fill); }},
      {"ember_stream_ring_slots", "gauge", "Slots of the stream's ring.",
       [](const S& s) { return Value(uint64_t{s.slot_count}); }},
      {"ember_stream_epoch", "gauge", "The epoch the stream is producing.",
       [](const S& s) { return Value(s.epoch); }},
  };
  return families;
}

const std::vector<Family<JobStatus>>& JobFamilies() {
  using J = JobStatus;
  static const std::vector<Family<J>> families = {
      {"ember_job_world_size", "gauge", "Ranks in the job's world.",
       [](const J& j) { return Value(uint64_t{j.world_size}); }},
      {"ember_job_ranks_joined", "gauge", "Ranks of the job joined now (here: this node's).",
       [](const J& j) { return Value(uint64_t{j.ranks_joined}); }},
      {"ember_job_leases_in_flight", "gauge",
       "Batches leased to the job's ranks and not yet consumed.",
       [](const J& j) { return Value(j.leases_in_flight); }},
      {"ember_job_batches_leased_total", "counter", "Batches leased over the job's life.",
       [](const J& j) { return Value(j.batches_leased); }},
      {"ember_job_batches_committed_total", "counter",
       "Batches committed (consumed) over the job's life.",
       [](const J& j) { return Value(j.batches_committed); }},
      {"ember_job_slowest_rank", "gauge",
       "The joined rank furthest behind (lowest epoch, then fewest batches of it consumed).",
       [](const J& j) -> std::optional<Value> {
         const RankProgress* slowest = SlowestRank(j);
         if (slowest == nullptr) return std::nullopt;
         return Value(uint64_t{slowest->rank});
       }},
      {"ember_job_slowest_rank_behind_batches", "gauge",
       "Batches the slowest joined rank has consumed fewer than the fastest one.",
       [](const J& j) -> std::optional<Value> {
         const RankProgress* slowest = SlowestRank(j);
         if (slowest == nullptr) return std::nullopt;
         return Value(BehindBatches(j, *slowest));
       }},
  };
  return families;
}

const std::vector<Family<DecodeWorkerStatus>>& DecodeWorkerFamilies() {
  using W = DecodeWorkerStatus;
  static const std::vector<Family<W>> families = {
      {"ember_decode_worker_rows_total", "counter",
       "Rows the remote decode worker decoded for this node's streams.",
       [](const W& w) { return Value(w.rows); }},
      {"ember_decode_worker_up", "gauge",
       "1 if the remote decode worker gets parts of batches, 0 if left out after a failed call.",
       [](const W& w) { return Value(uint64_t{w.up ? 1u : 0u}); }},
  };
  return families;
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string LabelName(const std::string& name, const MetricNames& names) {
  if (!names.hide) return name;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), names.key.data(), static_cast<int>(names.key.size()),
       reinterpret_cast<const unsigned char*>(name.data()), name.size(), digest, &length);
  static const char kHex[] = "0123456789abcdef";
  std::string out = "h";
  for (unsigned int i = 0; i < 8 && i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

std::string RenderPrometheusText(const DaemonStatus& status, const MetricNames& names) {
  Writer w;
  const auto gauge = [&w](const char* name, const char* help, const Value& value) {
    w.Header(name, "gauge", help);
    w.Sample(name, {}, value);
  };
  w.Header("ember_daemon_info", "gauge", "The daemon's version (value 1).");
  w.Sample("ember_daemon_info", {{"version", status.version}}, Value(uint64_t{1}));
  gauge("ember_daemon_uptime_seconds", "Seconds since the daemon started.",
        Value(status.uptime_seconds));
  if (status.open_fds != 0 || status.resident_bytes != 0) {  // 0: /proc was not readable
    gauge("ember_daemon_open_fds", "File descriptors the daemon has open.",
          Value(status.open_fds));
    gauge("ember_daemon_resident_memory_bytes",
          "The daemon's resident memory, rings' and segments' touched pages included.",
          Value(status.resident_bytes));
  }
  gauge("ember_daemon_shm_bytes_in_use", "Shared memory held by rings (of the budget).",
        Value(status.shm_bytes_in_use));
  gauge("ember_daemon_shm_bytes_budget", "The shared-memory budget of all rings (shm_budget).",
        Value(status.shm_bytes_budget));
  gauge("ember_daemon_datasets", "Datasets registered.", Value(uint64_t{status.datasets.size()}));
  gauge("ember_daemon_jobs", "Jobs this daemon coordinates or proxies.",
        Value(uint64_t{status.jobs.size()}));
  gauge("ember_daemon_streams", "Streams open.", Value(uint64_t{status.streams.size()}));
  gauge("ember_daemon_pending_segments",
        "Shared-memory segments waiting for their job's other ranks.",
        Value(uint64_t{status.pending_segments.size()}));
  w.Families<StreamStatus>(StreamFamilies(), status.streams,
                           [&names](const StreamStatus& s) { return StreamLabels(s, names); });
  w.Families<JobStatus>(JobFamilies(), status.jobs,
                        [&names](const JobStatus& j) { return JobLabels(j, names); });
  // Only on a node with decode_workers configured.
  if (!status.decode_workers.empty())
    w.Families<DecodeWorkerStatus>(DecodeWorkerFamilies(), status.decode_workers,
                                   [](const DecodeWorkerStatus& d) -> Labels {
                                     return {{"worker", d.address}};
                                   });
  return w.Take();
}

}  // namespace ember::daemon
