// loader_bench: reads a registered dataset through the SDK as fast as it can, from R reader
// processes (one stream each, ranks of one job), and reports samples per second and how
// long the readers waited for data. Run by `bench/compare loader_bench`, `image_bench`,
// `share_bench` and the scenarios.
//
//   loader_bench DATASET [--socket S] [--ranks R] [--batch-size B] [--seconds S]
//                [--compute-ms MS [--busy-compute]] [--touch] [--epochs E] [--share NAME]
//
// Each reader prints, as they happen, when its first batch came ("reader R: first batch
// ...") and when its measured window starts and ends (unix seconds, to match a trace or
// samples of the daemon); with --epochs E it reads E whole epochs instead of 1 s of
// warm-up and --seconds, and prints each epoch's samples, time and wall-clock span.
// --share NAME names a share group (StreamOptions::share): jobs reading the same dataset
// with the same seed in one group get their batches from one producer. Each reader then
// prints, after its measured window, its stream's share counters from the daemon's status
// ("reader R: share NAME: group=G shared_batches=... published=... consumed=...
// slots_touched=...").
// Last line: bench: samples_per_s=<float> ranks=<R> batch=<B>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "ember/client.h"

namespace {

using ember::Client;

int Fail(const std::string& what, const ember::Status& status) {
  std::cerr << "loader_bench: " << what << ": " << status.message() << "\n";
  return 1;
}

struct BenchOptions {
  uint32_t ranks = 2;
  uint32_t batch = 64;
  double seconds = 10;
  double compute_ms = 0;
  bool busy_compute = false;
  bool touch = false;
  uint32_t epochs = 0;  // 0: warm-up, then `seconds`; else this many whole epochs
  std::string share;    // StreamOptions::share: a share group's name; empty: none
};

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Printed by a reader process straight away (its parent prints only after all readers end).
void PrintNow(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

// With a share group: the reader's stream's share counters from the daemon's status (found
// by job and rank), printed at once; a line saying so if the status has no such stream.
void PrintShareCounters(Client& client, const std::string& job, uint32_t rank,
                        const std::string& share) {
  auto st = client.GetStatus();
  char text[256];
  if (!st.ok()) {
    std::snprintf(text, sizeof(text), "reader %u: share %s: status failed: %s\n", rank,
                  share.c_str(), st.status().message().c_str());
    PrintNow(text);
    return;
  }
  for (const auto& s : st->streams) {
    if (s.job != job || s.rank != rank) continue;
    std::snprintf(text, sizeof(text),
                  "reader %u: share %s: group=%s shared_batches=%llu published=%llu "
                  "consumed=%llu slots_touched=%u\n",
                  rank, share.c_str(), s.share.empty() ? "-" : s.share.c_str(),
                  static_cast<unsigned long long>(s.shared_batches),
                  static_cast<unsigned long long>(s.batches_published),
                  static_cast<unsigned long long>(s.batches_consumed), s.slots_touched);
    PrintNow(text);
    return;
  }
  std::snprintf(text, sizeof(text), "reader %u: share %s: no stream of job %s in the status\n",
                rank, share.c_str(), job.c_str());
  PrintNow(text);
}

// One bench reader process: pulls batches as fast as it can; with `touch`, reads every
// byte of each (as a CPU training step would; a GPU trainer's copy from the registered
// ring is DMA and costs no CPU); then spends `compute_ms` per batch as a training step
// would (0: none), and writes "<samples> <seconds> <seconds waiting for data>" to `out_fd`.
int BenchReader(const std::string& socket, const std::string& job, const std::string& dataset,
                uint32_t rank, const BenchOptions& bench, int out_fd) {
  const uint32_t ranks = bench.ranks, batch = bench.batch;
  const double seconds = bench.seconds, compute_ms = bench.compute_ms;
  const bool busy_compute = bench.busy_compute;
  using Clock = std::chrono::steady_clock;
  const auto connect_start = Clock::now();
  ember::ClientOptions options;
  options.socket_path = socket;
  auto client = Client::Connect(options);
  if (!client.ok()) return Fail("reader " + std::to_string(rank), client.status());
  ember::StreamOptions so;
  so.job = job;
  so.dataset = dataset;
  so.batch_size = batch;
  so.rank = rank;
  so.world_size = ranks;
  so.epochs = bench.epochs;
  so.share = bench.share;
  const double open_unix = UnixSeconds();
  const auto open_start = Clock::now();
  auto reader = (*client)->OpenStream(so);
  if (!reader.ok()) return Fail("reader " + std::to_string(rank), reader.status());
  const auto open_end = Clock::now();
  uint64_t checksum = 0;
  auto read_one = [&]() -> int64_t {
    auto next = (*reader)->Next();
    if (!next.ok()) {
      Fail("reader " + std::to_string(rank), next.status());
      return -1;
    }
    if (!next->has_value()) return 0;  // epoch boundary
    if (bench.touch) {
      for (const auto& t : (*next)->tensors) {
        const auto* p = static_cast<const uint64_t*>(t.data);
        for (uint64_t i = 0; i < t.nbytes / 8; ++i) checksum += p[i];
      }
    }
    if (compute_ms > 0) {
      const auto step = std::chrono::duration<double, std::milli>(compute_ms);
      if (busy_compute) {
        // A CPU training step: the core stays busy, so the daemon competes for it.
        const auto until = Clock::now() + step;
        while (Clock::now() < until) checksum += 1;
      } else {
        std::this_thread::sleep_for(step);  // a GPU step: the CPU is free meanwhile
      }
    }
    return (*next)->num_samples;
  };
  auto seconds_since = [](Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  };
  const int64_t first = read_one();
  if (first < 0) return 1;
  char text[256];
  std::snprintf(text, sizeof(text),
                "reader %u: first batch %.6f s after OpenStream (connect %.6f s, OpenStream "
                "%.6f s)\n",
                rank, seconds_since(open_start),
                std::chrono::duration<double>(open_start - connect_start).count(),
                std::chrono::duration<double>(open_end - open_start).count());
  PrintNow(text);
  auto report = [&](uint64_t samples, double elapsed, double waited) {
    std::string line = std::to_string(samples) + " " + std::to_string(elapsed) + " " +
                       std::to_string(waited) + " " + std::to_string(checksum & 0xff) + "\n";
    return write(out_fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) ? 0 : 1;
  };
  if (bench.epochs > 0) {
    // Whole epochs from the stream's start; epoch 0's count includes the first batch.
    uint64_t total = 0, samples = static_cast<uint64_t>(first);
    double epoch_unix = open_unix;
    auto epoch_start = open_start;
    for (uint32_t epoch = 0; epoch < bench.epochs;) {
      const int64_t n = read_one();
      if (n < 0) return 1;
      if (n > 0) {
        samples += static_cast<uint64_t>(n);
        continue;
      }
      const double now_unix = UnixSeconds(), took = seconds_since(epoch_start);
      std::snprintf(text, sizeof(text),
                    "reader %u: epoch %u: %llu samples in %.3f s (%.0f samples/s), unix "
                    "%.6f..%.6f\n",
                    rank, epoch, static_cast<unsigned long long>(samples), took,
                    samples / took, epoch_unix, now_unix);
      PrintNow(text);
      total += samples;
      samples = 0;
      epoch_unix = now_unix;
      epoch_start = Clock::now();
      ++epoch;
    }
    if (!bench.share.empty()) PrintShareCounters(**client, job, rank, bench.share);
    return report(total, seconds_since(open_start),
                  std::chrono::duration<double>((*reader)->wait_time()).count());
  }
  const auto warm_end = Clock::now() + std::chrono::milliseconds(1000);
  while (Clock::now() < warm_end)
    if (read_one() < 0) return 1;
  uint64_t samples = 0;
  const auto wait_before = (*reader)->wait_time();
  std::snprintf(text, sizeof(text), "reader %u: measuring from unix %.6f\n", rank,
                UnixSeconds());
  PrintNow(text);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    int64_t n = read_one();
    if (n < 0) return 1;
    samples += static_cast<uint64_t>(n);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double waited =
      std::chrono::duration<double>((*reader)->wait_time() - wait_before).count();
  std::snprintf(text, sizeof(text), "reader %u: measured %llu samples until unix %.6f\n", rank,
                static_cast<unsigned long long>(samples), UnixSeconds());
  PrintNow(text);
  if (!bench.share.empty()) PrintShareCounters(**client, job, rank, bench.share);
  return report(samples, elapsed, waited);
}

int Bench(const std::string& socket, const std::string& dataset, const BenchOptions& bench) {
  const uint32_t ranks = bench.ranks, batch = bench.batch;
  {
    // Fail early, in one process, on an unknown dataset or a missing daemon.
    ember::ClientOptions options;
    options.socket_path = socket;
    auto client = Client::Connect(options);
    if (!client.ok()) return Fail("bench", client.status());
    auto info = (*client)->InspectDataset(dataset);
    if (!info.ok()) return Fail("bench", info.status());
  }
  const std::string job = "bench-" + std::to_string(getpid()) + "-" + std::to_string(time(nullptr));
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (uint32_t r = 0; r < ranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return Fail("bench", ember::ErrnoStatus("pipe", errno));
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      _exit(BenchReader(socket, job, dataset, r, bench, fds[1]));
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  double total_rate = 0, total_wait = 0, total_time = 0;
  bool ok = true;
  for (uint32_t r = 0; r < ranks; ++r) {
    std::string out;
    char buf[256];
    ssize_t n;
    while ((n = read(pipes[r], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    close(pipes[r]);
    int status = 0;
    waitpid(pids[r], &status, 0);
    unsigned long long samples = 0;
    double elapsed = 0, waited = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        std::sscanf(out.c_str(), "%llu %lf %lf", &samples, &elapsed, &waited) != 3 ||
        elapsed <= 0) {
      std::cerr << "loader_bench: reader " << r << " failed\n";
      ok = false;
      continue;
    }
    std::printf("reader %u: %llu samples in %.2f s (%.0f samples/s), waited %.3f s for data (%.2f%%)\n",
                r, samples, elapsed, samples / elapsed, waited, 100 * waited / elapsed);
    total_rate += samples / elapsed;
    total_wait += waited;
    total_time += elapsed;
  }
  if (!ok) return 1;
  std::printf("data wait: %.4f of the readers' time (%.1f ms %s compute per batch)\n",
              total_wait / total_time, bench.compute_ms,
              bench.busy_compute ? "busy CPU" : "sleeping");
  std::printf("bench: samples_per_s=%.1f ranks=%u batch=%u\n", total_rate, ranks, batch);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loader_bench: read a dataset through the SDK as fast as possible"};
  std::string socket;
  app.add_option("--socket", socket, "emberd's unix socket (default: $EMBER_SOCKET, else " +
                                         std::string(ember::kDefaultSocket) + ")");
  std::string dataset;
  BenchOptions bench;
  app.add_option("dataset", dataset, "dataset name")->required();
  app.add_option("--ranks", bench.ranks, "reader processes")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--batch-size", bench.batch, "samples per batch")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--seconds", bench.seconds, "measured seconds (after 1 s of warm-up)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--compute-ms", bench.compute_ms,
                 "busy CPU time per batch, as a training step (the wait for data is reported)")
      ->check(CLI::Range(0.0, 60000.0))
      ->capture_default_str();
  app.add_flag("--busy-compute", bench.busy_compute,
               "spend --compute-ms on the CPU (a CPU training step) instead of sleeping "
               "(a GPU step)");
  app.add_option("--epochs", bench.epochs,
                 "read this many whole epochs (no warm-up; --seconds is ignored), printing "
                 "each epoch's time and wall-clock span; 0: warm-up, then --seconds")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--share", bench.share,
                 "a share group's name (StreamOptions::share): jobs of the same dataset and "
                 "seed in one group share one producer; prints each stream's share counters")
      ->check([](const std::string& v) { return v.empty() ? "--share takes a name" : ""; });
  app.add_flag("--touch", bench.touch,
               "read every byte of every batch in the readers (as a CPU training step would)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return Bench(socket, dataset, bench);
}
