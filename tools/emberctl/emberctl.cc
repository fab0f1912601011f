// emberctl: status, dataset registration and a read benchmark, over ember::Client.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <ctime>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "pack/pack_command.h"
#include "ember/client.h"

namespace {

using ember::Client;

int Fail(const std::string& what, const ember::Status& status) {
  std::cerr << "emberctl: " << what << ": " << status.message() << "\n";
  return 1;
}

std::string Shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

void PrintDataset(const ember::DatasetInfo& d, bool verbose) {
  std::printf("%-24s %-6s %-6s %10" PRIu64 " samples  %s\n", d.spec.name.c_str(),
              d.spec.format.c_str(), d.spec.split.c_str(), d.count, d.spec.path.c_str());
  if (!verbose) return;
  for (const auto& t : d.tensors)
    std::printf("  tensor %-8s %-8s %s per sample\n", t.name.c_str(), t.dtype.c_str(),
                Shape(t.shape).c_str());
  if (!d.spec.pipeline.empty()) std::printf("  pipeline (on error: %s)\n%s", d.spec.on_error.c_str(), d.spec.pipeline.c_str());
  for (const auto& f : d.files) std::printf("  file   %s\n", f.c_str());
}

int Status(Client& client) {
  auto st = client.GetStatus();
  if (!st.ok()) return Fail("status", st.status());
  std::printf("emberd %s pid %u up %.0f s on %s; shared memory %.1f / %.1f MiB\n",
              st->version.c_str(), st->pid, st->uptime_seconds, client.socket_path().c_str(),
              st->shm_bytes_in_use / 1048576.0, st->shm_bytes_budget / 1048576.0);
  std::printf("\ndatasets (%zu)\n", st->datasets.size());
  for (const auto& d : st->datasets) PrintDataset(d, false);
  std::printf("\njobs (%zu)\n", st->jobs.size());
  for (const auto& j : st->jobs)
    std::printf("%-28s dataset %-20s world %u  epochs started %" PRIu64 "  batches leased %" PRIu64
                " committed %" PRIu64 "\n",
                j.job.c_str(), j.dataset.c_str(), j.world_size, j.epochs_started, j.batches_leased,
                j.batches_committed);
  std::printf("\nstreams (%zu)\n", st->streams.size());
  for (const auto& s : st->streams)
    std::printf("#%-4" PRIu64 " job %-24s rank %u/%u epoch %" PRIu64 "  %10.0f samples/s  ring fill "
                "%3.0f%% of %u slots  published %" PRIu64 " consumed %" PRIu64 " skipped %" PRIu64 "\n",
                s.stream_id, s.job.c_str(), s.rank, s.world_size, s.epoch, s.samples_per_second,
                s.ring_fill * 100, s.slot_count, s.batches_published, s.batches_consumed,
                s.samples_skipped);
  if (!st->pending_segments.empty()) {
    // A rendezvous in progress, or one stuck on the ranks listed (segments are dropped
    // 10 minutes after they were created).
    std::printf("\nshared-memory segments waiting for ranks (%zu)\n", st->pending_segments.size());
    for (const auto& p : st->pending_segments) {
      std::string missing;
      for (uint32_t rank : p.missing_ranks) {
        missing += (missing.empty() ? "" : ",") + std::to_string(rank);
      }
      std::printf("job %-28s %-24s world %u  %.1f MiB  waiting %.0f s for rank %s\n",
                  p.job.c_str(), p.name.c_str(), p.world_size, p.bytes / 1048576.0,
                  p.age_seconds, missing.c_str());
    }
  }
  return 0;
}

struct BenchOptions {
  uint32_t ranks = 2;
  uint32_t batch = 64;
  double seconds = 10;
  double compute_ms = 0;
  bool busy_compute = false;
  bool touch = false;
};

// One bench reader process: pulls batches as fast as it can; with `touch`, reads every
// byte of each (as a CPU training step would; a GPU trainer's copy from the registered
// ring is DMA and costs no CPU); then spends `compute_ms` per batch as a training step
// would (0: none), and writes "<samples> <seconds> <seconds waiting for data>" to `out_fd`.
int BenchReader(const std::string& socket, const std::string& job, const std::string& dataset,
                uint32_t rank, const BenchOptions& bench, int out_fd) {
  const uint32_t ranks = bench.ranks, batch = bench.batch;
  const double seconds = bench.seconds, compute_ms = bench.compute_ms;
  const bool busy_compute = bench.busy_compute;
  ember::ClientOptions options;
  options.socket_path = socket;
  auto client = Client::Connect(options);
  if (!client.ok()) return Fail("bench reader " + std::to_string(rank), client.status());
  ember::StreamOptions so;
  so.job = job;
  so.dataset = dataset;
  so.batch_size = batch;
  so.rank = rank;
  so.world_size = ranks;
  so.epochs = 0;
  auto reader = (*client)->OpenStream(so);
  if (!reader.ok()) return Fail("bench reader " + std::to_string(rank), reader.status());
  using Clock = std::chrono::steady_clock;
  uint64_t checksum = 0;
  auto read_one = [&]() -> int64_t {
    auto next = (*reader)->Next();
    if (!next.ok()) {
      Fail("bench reader " + std::to_string(rank), next.status());
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
  const auto warm_end = Clock::now() + std::chrono::milliseconds(1000);
  while (Clock::now() < warm_end)
    if (read_one() < 0) return 1;
  uint64_t samples = 0;
  const auto wait_before = (*reader)->wait_time();
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
  std::string line = std::to_string(samples) + " " + std::to_string(elapsed) + " " +
                     std::to_string(waited) + " " + std::to_string(checksum & 0xff) + "\n";
  return write(out_fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) ? 0 : 1;
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
      std::cerr << "emberctl: bench reader " << r << " failed\n";
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
  CLI::App app{"emberctl: control and inspect emberd"};
  app.require_subcommand(1);
  std::string socket;
  app.add_option("--socket", socket, "emberd's unix socket (default: $EMBER_SOCKET, else " +
                                         std::string(ember::kDefaultSocket) + ")");

  auto* status_cmd = app.add_subcommand("status", "datasets, jobs and streams with their rates");

  auto* dataset_cmd = app.add_subcommand("dataset", "register and inspect datasets");
  dataset_cmd->require_subcommand(1);
  ember::DatasetSpec spec;
  auto* add_cmd = dataset_cmd->add_subcommand("add", "register a dataset");
  add_cmd->add_option("name", spec.name, "dataset name")->required();
  add_cmd->add_option("--format", spec.format, "data format (emberd lists the ones it knows)")
      ->capture_default_str();
  add_cmd->add_option("--path", spec.path, "where the data lives")->required();
  add_cmd->add_option("--split", spec.split, "split")
      ->check(CLI::IsMember({"train", "test"}))
      ->capture_default_str();
  std::string pipeline_file;
  add_cmd->add_option("--pipeline", pipeline_file,
                      "YAML file of decode/transform steps (see configs/pipelines/)");
  add_cmd->add_option("--on-error", spec.on_error, "a corrupt sample fails the stream or is skipped")
      ->check(CLI::IsMember({"fail", "skip"}))
      ->capture_default_str();
  auto* ls_cmd = dataset_cmd->add_subcommand("ls", "list registered datasets");
  std::string name;
  auto* inspect_cmd = dataset_cmd->add_subcommand("inspect", "count, shapes and dtypes");
  inspect_cmd->add_option("name", name, "dataset name")->required();
  auto* rm_cmd = dataset_cmd->add_subcommand("rm", "unregister a dataset (files are kept)");
  rm_cmd->add_option("name", name, "dataset name")->required();

  auto* bench_cmd = app.add_subcommand("bench", "read a dataset through the SDK as fast as possible");
  std::string bench_dataset;
  BenchOptions bench;
  bench_cmd->add_option("dataset", bench_dataset, "dataset name")->required();
  bench_cmd->add_option("--ranks", bench.ranks, "reader processes")->check(CLI::Range(1, 256))->capture_default_str();
  bench_cmd->add_option("--batch-size", bench.batch, "samples per batch")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  bench_cmd->add_option("--seconds", bench.seconds, "measured seconds (after 1 s of warm-up)")->check(CLI::Range(0.1, 3600.0))->capture_default_str();

  // Packing writes files here, in this process; it needs no daemon.
  ember::pack::PackCommand pack;
  auto* pack_cmd = ember::pack::AddPackCommand(app, &pack);

  bench_cmd->add_option("--compute-ms", bench.compute_ms,
                        "busy CPU time per batch, as a training step (the wait for data is reported)")
      ->check(CLI::Range(0.0, 60000.0))
      ->capture_default_str();
  bench_cmd->add_flag("--busy-compute", bench.busy_compute,
                      "spend --compute-ms on the CPU (a CPU training step) instead of sleeping "
                      "(a GPU step)");
  bench_cmd->add_flag("--touch", bench.touch,
                      "read every byte of every batch in the readers (as a CPU training step "
                      "would)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*pack_cmd) return ember::pack::RunPackCommand(pack, stdout, stderr);
  if (socket.empty()) {
    const char* env = std::getenv("EMBER_SOCKET");
    socket = (env != nullptr && *env != '\0') ? env : ember::kDefaultSocket;
  }
  if (*bench_cmd) return Bench(socket, bench_dataset, bench);

  ember::ClientOptions options;
  options.socket_path = socket;
  auto client = Client::Connect(options);
  if (!client.ok()) return Fail("connect", client.status());
  Client& c = **client;
  if (*status_cmd) return Status(c);
  if (*add_cmd) {
    if (!pipeline_file.empty()) {
      std::ifstream in(pipeline_file);
      if (!in) {
        std::cerr << "emberctl: dataset add " << spec.name << ": --pipeline: cannot read '"
                  << pipeline_file << "': " << std::strerror(errno) << "\n";
        return 1;
      }
      std::stringstream text;
      text << in.rdbuf();
      spec.pipeline = text.str();
    }
    // emberd resolves paths itself; a relative one means relative to here.
    if (!spec.path.empty() && spec.path[0] != '/') {
      char cwd[4096];
      if (getcwd(cwd, sizeof(cwd)) != nullptr) spec.path = std::string(cwd) + "/" + spec.path;
    }
    auto info = c.AddDataset(spec);
    if (!info.ok()) {
      std::string what = "dataset add " + spec.name;
      if (!pipeline_file.empty()) what += " (pipeline " + pipeline_file + ")";
      return Fail(what, info.status());
    }
    std::printf("registered ");
    PrintDataset(*info, true);
    return 0;
  }
  if (*ls_cmd) {
    auto all = c.ListDatasets();
    if (!all.ok()) return Fail("dataset ls", all.status());
    for (const auto& d : *all) PrintDataset(d, false);
    return 0;
  }
  if (*inspect_cmd) {
    auto info = c.InspectDataset(name);
    if (!info.ok()) return Fail("dataset inspect " + name, info.status());
    PrintDataset(*info, true);
    return 0;
  }
  if (*rm_cmd) {
    ember::Status s = c.RemoveDataset(name);
    if (!s.ok()) return Fail("dataset rm " + name, s);
    std::printf("removed %s\n", name.c_str());
    return 0;
  }
  return 2;
}
