#include "tools/emberctl/jobs_command.h"

#include <algorithm>
#include <cinttypes>
#include <tuple>
#include <utility>

namespace ember::emberctl {
namespace {

constexpr size_t kMaxJobsNamed = 8;

const StreamStatus* FindStream(const DaemonStatus& status, const JobStatus& job, uint32_t rank) {
  for (const auto& s : status.streams)
    if (s.job == job.job && s.rank == rank) return &s;
  return nullptr;
}

// Batches of the job's epoch consumed by all its ranks listed, and of how many.
std::pair<uint64_t, uint64_t> EpochProgress(const JobStatus& job) {
  const uint64_t epoch = JobEpoch(job);
  uint64_t consumed = 0;
  for (const auto& r : job.ranks) consumed += r.epoch > epoch ? job.batches_per_rank : r.consumed;
  // A job another daemon coordinates lists only this node's ranks, and a status lists at
  // most kMaxRanksListed of a job's.
  const uint64_t ranks = job.ranks.size();
  return {consumed, ranks * job.batches_per_rank};
}

std::string Progress(uint64_t done, uint64_t of) {
  std::string s = std::to_string(done) + "/" + std::to_string(of);
  if (of > 0) s += " (" + std::to_string(done * 100 / of) + "%)";
  return s;
}

uint64_t LeasesInFlight(const JobStatus& job) {
  uint64_t leased = 0;
  for (const auto& r : job.ranks) leased += r.leased;
  return leased;
}

}  // namespace

const RankProgress* SlowestRank(const JobStatus& job) {
  const RankProgress* slowest = nullptr;
  for (const auto& r : job.ranks) {
    if (!r.joined) continue;
    if (slowest == nullptr ||
        std::tie(r.epoch, r.consumed) < std::tie(slowest->epoch, slowest->consumed))
      slowest = &r;
  }
  return slowest;
}

std::string DescribeSlowest(const JobStatus& job) {
  const RankProgress* r = SlowestRank(job);
  if (r == nullptr) return "-";
  return "r" + std::to_string(r->rank) + " e" + std::to_string(r->epoch) + " " +
         std::to_string(r->consumed) + "/" + std::to_string(job.batches_per_rank);
}

uint64_t JobEpoch(const JobStatus& job) {
  if (job.ranks.empty()) return 0;
  uint64_t epoch = job.ranks[0].epoch;
  for (const auto& r : job.ranks) epoch = std::min(epoch, r.epoch);
  return epoch;
}

std::string Coordinator(const JobStatus& job) {
  return job.coordinator.empty() ? "local" : job.coordinator;
}

std::string RankNode(const DaemonStatus& status, const JobStatus& job, const RankProgress& rank) {
  if (rank.joined && !rank.node.empty()) return rank.node;
  if (FindStream(status, job, rank.rank) != nullptr) return "local";
  return rank.joined ? "?" : "-";
}

void PrintJobs(const DaemonStatus& status, std::FILE* out) {
  if (status.jobs.empty()) {
    std::fprintf(out, "no jobs\n");
    return;
  }
  std::fprintf(out, "%-24s %-16s %5s %5s %5s %-16s %6s %-16s %-11s %s\n", "JOB", "DATASET",
               "WORLD", "BATCH", "EPOCH", "PROGRESS", "LEASED", "SLOWEST", "COORDINATOR",
               "NODES");
  for (const auto& j : status.jobs) {
    const auto [consumed, of] = EpochProgress(j);
    std::string nodes;
    for (const auto& r : j.ranks) nodes += (nodes.empty() ? "" : ",") + RankNode(status, j, r);
    std::fprintf(out, "%-24s %-16s %5u %5u %5" PRIu64 " %-16s %6" PRIu64 " %-16s %-11s %s\n",
                 j.job.c_str(), j.dataset.c_str(), j.world_size, j.batch_size, JobEpoch(j),
                 Progress(consumed, of).c_str(), LeasesInFlight(j), DescribeSlowest(j).c_str(),
                 Coordinator(j).c_str(), nodes.c_str());
  }
}

int InspectJob(const DaemonStatus& status, const std::string& job, std::FILE* out,
               std::FILE* err) {
  const JobStatus* found = nullptr;
  for (const auto& j : status.jobs)
    if (j.job == job) found = &j;
  if (found == nullptr) {
    std::string known;
    for (const auto& j : status.jobs) known += (known.empty() ? "" : ", ") + j.job;
    if (status.jobs.empty()) known = "no jobs";
    else if (status.jobs.size() > kMaxJobsNamed)
      known = std::to_string(status.jobs.size()) + " jobs (emberctl jobs lists them)";
    else known = "jobs: " + known;
    std::fprintf(err, "emberctl: job '%s' not found (%s)\n", job.c_str(), known.c_str());
    return 1;
  }
  const JobStatus& j = *found;
  const auto [consumed, of] = EpochProgress(j);
  std::fprintf(out, "job %s\n", j.job.c_str());
  std::fprintf(out, "  dataset         %s\n", j.dataset.c_str());
  std::fprintf(out, "  world size      %u\n", j.world_size);
  std::fprintf(out, "  batch size      %u\n", j.batch_size);
  std::fprintf(out, "  batches/rank    %" PRIu64 " per epoch\n", j.batches_per_rank);
  std::fprintf(out, "  coordinator     %s%s\n", Coordinator(j).c_str(),
               j.coordinator.empty() ? "" : " (ranks below: this node's only)");
  std::fprintf(out, "  epoch           %" PRIu64 "\n", JobEpoch(j));
  std::fprintf(out, "  consumed        %s of the epoch's batches\n", Progress(consumed, of).c_str());
  std::fprintf(out, "  slowest rank    %s\n", DescribeSlowest(j).c_str());
  std::fprintf(out, "  epochs started  %" PRIu64 "\n", j.epochs_started);
  std::fprintf(out, "  batches         %" PRIu64 " leased, %" PRIu64 " committed, %" PRIu64
               " in flight\n",
               j.batches_leased, j.batches_committed, LeasesInFlight(j));
  std::fprintf(out, "\n%-5s %-6s %-6s %5s %-12s %6s %-7s %10s %9s\n", "RANK", "JOINED", "NODE",
               "EPOCH", "CONSUMED", "LEASED", "STREAM", "SAMPLES/S", "RING FILL");
  for (const auto& r : j.ranks) {
    std::fprintf(out, "%-5u %-6s %-6s %5" PRIu64 " %-12s %6" PRIu64, r.rank,
                 r.joined ? "yes" : "no", RankNode(status, j, r).c_str(), r.epoch,
                 (std::to_string(r.consumed) + "/" + std::to_string(j.batches_per_rank)).c_str(),
                 r.leased);
    if (const StreamStatus* s = FindStream(status, j, r.rank))
      std::fprintf(out, " %-7s %10.0f %8.0f%%", ("#" + std::to_string(s->stream_id)).c_str(),
                   s->samples_per_second, s->ring_fill * 100);
    std::fprintf(out, "\n");
  }
  if (j.ranks_unlisted > 0)
    std::fprintf(out, "... and %u more ranks (a status lists %u; %u ranks joined in all)\n",
                 j.ranks_unlisted, kMaxRanksListed, j.ranks_joined);
  return 0;
}

}  // namespace ember::emberctl
