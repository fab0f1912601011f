#include "tools/emberctl/top_command.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

#include "tools/emberctl/jobs_command.h"

namespace ember::emberctl {
namespace {

constexpr double kMiB = 1048576.0;

struct Row {
  const StreamStatus* stream;
  std::optional<double> samples_per_second, mb_per_second;
  std::optional<double> stall_percent;  // of the interval
};

std::string Format(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

std::string Rate(const std::optional<double>& value, const char* format) {
  return value ? Format(format, *value) : "-";
}

// Counter growth, 0 where it went down (a stream id is never reused, but be safe).
double Growth(double before, double now) { return now > before ? now - before : 0; }

// Batches the slowest joined rank is behind the fastest one (0 with none joined).
uint64_t BehindBatches(const JobStatus& job) {
  const RankProgress* slowest = SlowestRank(job);
  if (slowest == nullptr) return 0;
  const auto position = [&job](const RankProgress& r) {
    return r.epoch * job.batches_per_rank + r.consumed;
  };
  uint64_t fastest = position(*slowest);
  for (const RankProgress& r : job.ranks)
    if (r.joined) fastest = std::max(fastest, position(r));
  return fastest - position(*slowest);
}

}  // namespace

std::string RenderTop(const DaemonStatus& before, const DaemonStatus& now, double seconds) {
  std::map<uint64_t, const StreamStatus*> earlier;
  for (const StreamStatus& s : before.streams) earlier[s.stream_id] = &s;
  std::vector<Row> rows;
  for (const StreamStatus& s : now.streams) {
    Row row{&s, std::nullopt, std::nullopt, std::nullopt};
    auto it = earlier.find(s.stream_id);
    if (it != earlier.end()) {
      const StreamStatus& b = *it->second;
      row.samples_per_second =
          Growth(double(b.samples_published), double(s.samples_published)) / seconds;
      row.mb_per_second = Growth(double(b.bytes_published), double(s.bytes_published)) /
                          kMiB / seconds;
      row.stall_percent =
          std::min(100.0, Growth(b.data_stall_seconds, s.data_stall_seconds) * 100 / seconds);
    }
    rows.push_back(row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::make_tuple(a.stall_percent.value_or(-1), a.stream->data_stall_seconds) >
           std::make_tuple(b.stall_percent.value_or(-1), b.stream->data_stall_seconds);
  });

  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line),
                "emberd %s pid %u up %.0f s: %" PRIu64 " fds, RSS %.1f MiB, shm %.1f / %.1f "
                "MiB; %zu streams, %zu jobs (every %.1f s)\n\n",
                now.version.c_str(), now.pid, now.uptime_seconds, now.open_fds,
                now.resident_bytes / kMiB, now.shm_bytes_in_use / kMiB,
                now.shm_bytes_budget / kMiB, now.streams.size(), now.jobs.size(), seconds);
  out += line;
  if (rows.empty()) out += "no streams\n";
  if (!rows.empty()) {
    std::snprintf(line, sizeof(line), "%-6s %-20s %4s %-16s %10s %8s %5s %6s %9s %s\n",
                  "STREAM", "JOB", "RANK", "DATASET", "SAMPLES/S", "MB/S", "FILL", "STALL%",
                  "STALL S", "ERR/SKIP");
    out += line;
  }
  for (const Row& r : rows) {
    const StreamStatus& s = *r.stream;
    const std::string errors =
        std::to_string(s.decode_errors) + "/" + std::to_string(s.samples_skipped);
    std::snprintf(line, sizeof(line), "%-6s %-20s %4u %-16s %10s %8s %4.0f%% %6s %9.2f %s\n",
                  ("#" + std::to_string(s.stream_id)).c_str(), s.job.c_str(), s.rank,
                  s.dataset.c_str(), Rate(r.samples_per_second, "%.0f").c_str(),
                  Rate(r.mb_per_second, "%.2f").c_str(), s.ring_fill * 100,
                  Rate(r.stall_percent, "%.0f%%").c_str(),
                  s.data_stall_seconds, errors.c_str());
    out += line;
  }
  if (now.jobs.empty()) return out;
  std::snprintf(line, sizeof(line), "\n%-20s %5s %6s %6s %-16s %6s\n", "JOB", "WORLD", "JOINED",
                "LEASED", "SLOWEST", "BEHIND");
  out += line;
  for (const JobStatus& j : now.jobs) {
    std::snprintf(line, sizeof(line), "%-20s %5u %6u %6" PRIu64 " %-16s %6" PRIu64 "\n",
                  j.job.c_str(), j.world_size, j.ranks_joined, j.leases_in_flight,
                  DescribeSlowest(j).c_str(), BehindBatches(j));
    out += line;
  }
  return out;
}

int RunTop(Client& client, const TopOptions& options, std::FILE* out, std::FILE* err) {
  const bool terminal = isatty(fileno(out)) != 0;
  Result<DaemonStatus> before = client.GetStatus();
  while (before.ok()) {
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(options.interval);
    Result<DaemonStatus> now = client.GetStatus();
    if (!now.ok()) {
      before = now.status();
      break;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string frame = RenderTop(*before, *now, seconds);
    if (terminal && !options.once) std::fputs("\x1b[H\x1b[2J", out);
    std::fputs(frame.c_str(), out);
    std::fflush(out);
    if (options.once) return 0;
    before = std::move(now);
  }
  std::fprintf(err, "emberctl: top: %s\n", before.status().message().c_str());
  return 1;
}

}  // namespace ember::emberctl
