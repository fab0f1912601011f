#include "tools/emberctl/dataset_command.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <iterator>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ember::emberctl {
namespace {

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// "2 s", "3 min 5 s", "2 h 10 min".
std::string Duration(double seconds) {
  const uint64_t s = static_cast<uint64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " min";
}

}  // namespace

std::string Bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = bytes / 1024.0;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  return Format("%.1f ", value) + units[unit];
}

std::string RenderProgress(const RegistrationProgress& p) {
  std::string line = "indexing " + p.dataset + ":";
  if (p.shards_total == 0) {
    line += " listing shards";
  } else {
    line += " " + std::to_string(p.shards_done) + "/" + std::to_string(p.shards_total) +
            " shards, " + Bytes(p.bytes_done);
    if (p.bytes_done > 0 && p.elapsed_seconds > 0)
      line += ", " + Bytes(static_cast<uint64_t>(p.bytes_done / p.elapsed_seconds)) + "/s";
    if (p.shards_done > 0 && p.shards_done < p.shards_total && p.elapsed_seconds > 0) {
      const double left =
          p.elapsed_seconds * (p.shards_total - p.shards_done) / p.shards_done;
      line += ", ETA " + Duration(left);
    }
  }
  return line + " (" + Format("%.1f", p.elapsed_seconds) + " s)";
}

std::string RenderDetails(const DatasetDetails& d) {
  std::string out = "  source  " + d.source + "\n";
  if (!d.info.spec.endpoint.empty()) out += "  endpoint " + d.info.spec.endpoint + "\n";
  if (d.shards > 0) out += "  shards  " + std::to_string(d.shards) + "\n";
  if (d.index_bytes > 0)
    out += "  index   " + Bytes(d.index_bytes) + " in emberd's memory (owner's dataset_memory)\n";
  out += "  shuffle " + d.info.spec.shuffle;
  if (d.info.spec.shuffle == "shards")
    out += ", " + std::to_string(d.info.spec.shuffle_window) + " shards at a time";
  out += "\n";
  if (d.remote) {
    const uint64_t total = d.shards > 0 ? d.shards : d.info.files.size();
    out += "  cache   " + std::to_string(d.shards_cached) + "/" + std::to_string(total) +
           " shards cached, " + Bytes(d.bytes_cached) + "\n";
  }
  return out;
}

Result<DatasetInfo> AddWithProgress(Client& client, const DatasetSpec& spec,
                                    const ProgressOptions& options, std::FILE* out) {
  if (options.quiet) return client.AddDataset(spec);
  std::mutex mu;
  std::condition_variable wake;
  bool done = false;  // guarded by mu
  std::thread watcher([&] {
    using Clock = std::chrono::steady_clock;
    std::string last;
    Clock::time_point last_plain{};
    bool drawn = false;
    std::unique_lock<std::mutex> lock(mu);
    while (!wake.wait_for(lock, options.interval, [&] { return done; })) {
      lock.unlock();
      Result<RegistrationProgress> progress = client.GetRegistrationProgress(spec.name);
      lock.lock();
      if (done) break;
      if (!progress.ok()) {
        // Not begun yet, over, or not followed: nothing to draw now. Anything else (an
        // older daemon without the call, a lost connection): nothing ever, stop asking.
        if (progress.status().code() == StatusCode::kNotFound) continue;
        break;
      }
      const std::string line = RenderProgress(*progress);
      if (options.terminal) {
        std::fprintf(out, "\r%s\x1b[K", line.c_str());
        drawn = true;
      } else {
        // The line without its clock: write it again only when it moved.
        const std::string moved = line.substr(0, line.rfind(" ("));
        const Clock::time_point now = Clock::now();
        if (moved == last || now - last_plain < options.plain_every) continue;
        std::fprintf(out, "%s\n", line.c_str());
        last = moved;
        last_plain = now;
      }
      std::fflush(out);
    }
    if (drawn) {
      std::fprintf(out, "\r\x1b[K");
      std::fflush(out);
    }
  });
  Result<DatasetInfo> added = client.AddDataset(spec);
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  wake.notify_all();
  watcher.join();
  return added;
}

}  // namespace ember::emberctl
