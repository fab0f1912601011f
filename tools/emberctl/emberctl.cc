// emberctl: status, jobs, dataset registration and packing, over ember::Client.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ember/client.h"
#include "pack/imagefolder_pack.h"
#include "pack/pack_command.h"
#include "tools/emberctl/cache_command.h"
#include "tools/emberctl/dataset_command.h"
#include "tools/emberctl/jobs_command.h"
#include "tools/emberctl/top_command.h"

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

// With `details` (dataset inspect), its source, shards, memory, shuffle and cache too.
void PrintDataset(const ember::DatasetInfo& d, bool verbose,
                  const ember::DatasetDetails* details = nullptr) {
  std::printf("%-24s %-6s %-6s %10" PRIu64 " samples  %s\n", d.spec.name.c_str(),
              d.spec.format.c_str(), d.spec.split.c_str(), d.count, d.spec.path.c_str());
  if (!verbose) return;
  if (d.owner_uid != 0xffffffffu)
    std::printf("  owner  uid %u%s\n", d.owner_uid, d.spec.shared ? " (shared with all users)" : "");
  if (details != nullptr) std::fputs(ember::emberctl::RenderDetails(*details).c_str(), stdout);
  for (const auto& t : d.tensors)
    std::printf("  tensor %-8s %-8s %s per sample\n", t.name.c_str(), t.dtype.c_str(),
                Shape(t.shape).c_str());
  if (!d.spec.endpoint.empty() && details == nullptr)
    std::printf("  endpoint %s\n", d.spec.endpoint.c_str());
  if (d.spec.shuffle == "shards" && details == nullptr)
    std::printf("  shuffle by shards, %u at a time\n", d.spec.shuffle_window);
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
  for (const auto& s : st->streams) {
    std::printf("#%-4" PRIu64 " job %-24s rank %u/%u epoch %" PRIu64 "  %10.0f samples/s  ring fill "
                "%3.0f%% of %u slots (depth %u, %u touched)  published %" PRIu64 " consumed %" PRIu64
                " skipped %" PRIu64,
                s.stream_id, s.job.c_str(), s.rank, s.world_size, s.epoch, s.samples_per_second,
                s.ring_fill * 100, s.slot_count, s.prefetch_depth, s.slots_touched,
                s.batches_published, s.batches_consumed, s.samples_skipped);
    // Batches from the share group's rows, of those published (the rest were decoded
    // for this stream: it was behind the group's window, or joined it late).
    if (!s.share.empty())
      std::printf("  share %s: %" PRIu64 " from the group", s.share.c_str(), s.shared_batches);
    // Rows of its batches that remote decode workers decoded (config decode_workers).
    if (s.remote_rows > 0) std::printf("  remote rows %" PRIu64, s.remote_rows);
    std::printf("\n");
  }
  if (!st->decode_workers.empty()) {
    // This node's remote decode workers: the rows each decoded of all the rows its
    // streams decoded (here and remotely); a worker down is left out until its retry.
    std::printf("\ndecode workers (%zu)\n", st->decode_workers.size());
    for (const auto& w : st->decode_workers) {
      std::printf("%-28s %-4s rows %12" PRIu64 " (%5.1f%%)  %10.0f rows/s  calls %" PRIu64
                  " failed %" PRIu64,
                  w.address.c_str(), w.up ? "up" : "down", w.rows, w.share * 100,
                  w.rows_per_second, w.calls, w.failed_calls);
      if (!w.up && !w.last_error.empty()) std::printf("  last error: %s", w.last_error.c_str());
      std::printf("\n");
    }
  }
  if (!st->pending_segments.empty()) {
    // A rendezvous in progress, or one stuck on the ranks listed (segments are dropped
    // 10 minutes after they were created).
    std::printf("\nshared-memory segments waiting for ranks (%zu)\n", st->pending_segments.size());
    for (const auto& p : st->pending_segments) {
      std::string missing;
      for (uint32_t rank : p.missing_ranks) {
        missing += (missing.empty() ? "" : ",") + std::to_string(rank);
      }
      if (p.missing_unlisted > 0) missing += " and " + std::to_string(p.missing_unlisted) + " more";
      std::printf("job %-28s %-24s world %u  %.1f MiB  waiting %.0f s for rank %s\n",
                  p.job.c_str(), p.name.c_str(), p.world_size, p.bytes / 1048576.0,
                  p.age_seconds, missing.c_str());
    }
  }
  return 0;
}

// Adds the subcommand "pack", parsing into `*command` (which must outlive the parse).
CLI::App* AddPackCommand(CLI::App& app, ember::pack::PackCommand* command) {
  CLI::App* pack = app.add_subcommand(
      "pack", "pack a dataset into checksummed shard files, to register with --format packed");
  pack->add_option("src", command->src, "the dataset to pack (an image folder)")->required();
  pack->add_option("out", command->out, "the directory to create (must not exist)")->required();
  pack->add_option("--format", command->format, "the source's format")
      ->check(CLI::IsMember({ember::pack::kImageFolderFormat}))
      ->capture_default_str();
  pack->add_option("--shard-mib", command->shard_mib, "target shard size in MiB")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  pack->add_option("--align", command->record_alignment,
                   "record alignment in bytes (a power of two, 8 .. 1048576)")
      ->check(CLI::Range(uint32_t{8}, uint32_t{1} << 20))
      ->capture_default_str();
  pack->add_flag("--overwrite", command->overwrite,
                 "replace OUT if it is a packed dataset already");
  pack->add_flag("--quiet", command->quiet, "no progress lines");
  return pack;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"emberctl: control and inspect emberd"};
  app.require_subcommand(1);
  std::string socket;
  app.add_option("--socket", socket, "emberd's unix socket (default: $EMBER_SOCKET, else " +
                                         std::string(ember::kDefaultSocket) +
                                         ", else your private emberd if it runs)");
  uint32_t timeout_s = 60;
  app.add_option("--timeout", timeout_s,
                 "seconds to wait for emberd to connect and to answer each request")
      ->check(CLI::Range(1u, 86400u))
      ->capture_default_str();

  auto* status_cmd = app.add_subcommand("status", "datasets, jobs and streams with their rates");

  auto* top_cmd = app.add_subcommand(
      "top", "streams live, the most stalled first: rates, ring fill, data stall, errors");
  double top_interval_s = 1;
  top_cmd->add_option("--interval", top_interval_s, "seconds between frames")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  bool top_once = false;
  top_cmd->add_flag("--once", top_once, "print one frame (after one interval) and exit");

  auto* jobs_cmd = app.add_subcommand(
      "jobs", "each job's epoch, progress, leases, slowest rank, coordinator and rank nodes");
  auto* job_cmd = app.add_subcommand("job", "inspect a job");
  job_cmd->require_subcommand(1);
  std::string job_id;
  auto* job_inspect_cmd = job_cmd->add_subcommand("inspect", "a job's details and its ranks");
  job_inspect_cmd->add_option("id", job_id, "the job's name")->required();

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
  add_cmd->add_flag("--shared", spec.shared,
                    "every user of the daemon may stream it (default: only you and root)");
  add_cmd->add_option("--shuffle", spec.shuffle,
                      "how jobs shuffle it: over all samples, or by shards (shards permuted, "
                      "samples mixed within windows of --shuffle-window shards: for remote data)")
      ->check(CLI::IsMember({"samples", "shards"}))
      ->capture_default_str();
  add_cmd->add_option("--shuffle-window", spec.shuffle_window,
                      "shards whose samples are mixed together with --shuffle shards")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  add_cmd->add_option("--endpoint", spec.endpoint,
                      "for an s3:// --path: the S3 endpoint URL, http(s)://HOST[:PORT], its "
                      "objects are read from (default: emberd's; region and credentials stay "
                      "emberd's)");
  bool add_quiet = false;
  add_cmd->add_flag("--quiet", add_quiet,
                    "no progress (shards indexed, bytes, rate, time left) while it registers");
  auto* ls_cmd = dataset_cmd->add_subcommand("ls", "list registered datasets");
  std::string name;
  auto* inspect_cmd = dataset_cmd->add_subcommand(
      "inspect", "count, shapes and dtypes, source, shards, index memory, shuffle, cache");
  inspect_cmd->add_option("name", name, "dataset name")->required();
  auto* rm_cmd = dataset_cmd->add_subcommand("rm", "unregister a dataset (files are kept)");
  rm_cmd->add_option("name", name, "dataset name")->required();

  auto* cache_cmd = app.add_subcommand(
      "cache", "the node's shard cache: totals, hits, and your datasets' entries");
  cache_cmd->require_subcommand(0, 1);
  auto* cache_clear_cmd = cache_cmd->add_subcommand(
      "clear", "remove every entry no reader holds (root and emberd's user only)");

  // Packing writes files here, in this process; it needs no daemon.
  ember::pack::PackCommand pack;
  auto* pack_cmd = AddPackCommand(app, &pack);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*pack_cmd) return ember::pack::RunPackCommand(pack, stdout, stderr);
  // No --socket: $EMBER_SOCKET, else the node's daemon, else the user's private one if it
  // runs (emberctl looks; it starts no daemon).
  ember::ClientOptions options;
  options.socket_path = socket;
  options.start_private_daemon = false;
  options.connect_timeout = std::chrono::seconds(timeout_s);
  options.call_timeout = std::chrono::seconds(timeout_s);
  auto client = Client::Connect(options);
  if (!client.ok()) return Fail("connect", client.status());
  Client& c = **client;
  if (*status_cmd) return Status(c);
  if (*top_cmd) {
    ember::emberctl::TopOptions top;
    top.interval = std::chrono::milliseconds(static_cast<int64_t>(top_interval_s * 1000));
    top.once = top_once;
    return ember::emberctl::RunTop(c, top, stdout, stderr);
  }
  if (*jobs_cmd || *job_inspect_cmd) {
    auto st = c.GetStatus();
    if (!st.ok()) return Fail(*jobs_cmd ? "jobs" : "job inspect " + job_id, st.status());
    if (*job_inspect_cmd) return ember::emberctl::InspectJob(*st, job_id, stdout, stderr);
    ember::emberctl::PrintJobs(*st, stdout);
    return 0;
  }
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
    // emberd resolves paths itself; a relative one means relative to here (a URL is not
    // a path).
    if (!spec.path.empty() && spec.path[0] != '/' &&
        spec.path.find("://") == std::string::npos) {
      char cwd[4096];
      if (getcwd(cwd, sizeof(cwd)) != nullptr) spec.path = std::string(cwd) + "/" + spec.path;
    }
    // Progress on stderr (beside the messages), redrawn in place on a terminal.
    ember::emberctl::ProgressOptions progress;
    progress.terminal = isatty(fileno(stderr)) == 1;
    progress.quiet = add_quiet;
    auto info = ember::emberctl::AddWithProgress(c, spec, progress, stderr);
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
    auto details = c.DescribeDataset(name);
    if (details.ok()) {
      PrintDataset(details->info, true, &*details);
      return 0;
    }
    if (details.status().code() != ember::StatusCode::kInternal)  // else: an older emberd
      return Fail("dataset inspect " + name, details.status());
    auto info = c.InspectDataset(name);
    if (!info.ok()) return Fail("dataset inspect " + name, info.status());
    PrintDataset(*info, true);
    return 0;
  }
  if (*cache_clear_cmd) {
    auto cleared = c.ClearShardCache();
    if (!cleared.ok()) return Fail("cache clear", cleared.status());
    std::fputs(ember::emberctl::RenderCleared(*cleared).c_str(), stdout);
    return 0;
  }
  if (*cache_cmd) {
    auto cache = c.GetShardCache();
    if (!cache.ok()) return Fail("cache", cache.status());
    std::fputs(ember::emberctl::RenderCache(*cache).c_str(), stdout);
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
