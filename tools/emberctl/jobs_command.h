// What `emberctl jobs` and `emberctl job inspect ID` print, from one DaemonStatus: each
// job's epoch and progress, leases in flight, its slowest rank, its coordinator and the
// node of each rank.
//
// A job's epoch is the lowest of its ranks' epochs (each rank's first epoch not fully
// consumed); its progress counts the batches of that epoch consumed by all ranks (a rank
// already past it counts all of its batches) over world_size x batches_per_rank.
// Nodes and coordinator as far as the daemon asked knows them: "local" for itself (every
// job's coordinator, and each rank with a stream on it), "-" for a rank not joined, "?"
// for a rank joined without a stream here (on another node, which the status does not
// name yet).
#ifndef EMBER_TOOLS_EMBERCTL_JOBS_COMMAND_H_
#define EMBER_TOOLS_EMBERCTL_JOBS_COMMAND_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "ember/client.h"

namespace ember::emberctl {

// The lowest (epoch, consumed) among the job's joined ranks; nullptr if none is joined.
// Points into `job`.
const RankProgress* SlowestRank(const JobStatus& job);

// The slowest rank as "r<rank> e<epoch> <consumed>/<batches_per_rank>", or "-" if no rank
// is joined.
std::string DescribeSlowest(const JobStatus& job);

// The lowest epoch of the job's ranks (0 for a job without ranks).
uint64_t JobEpoch(const JobStatus& job);

// The daemon coordinating `job`: "local" (the jobs a daemon reports are those it
// coordinates; a job it only proxies shows in its streams).
std::string Coordinator(const JobStatus& job);

// The node `rank` of `job` runs on, as seen from the daemon that reported `status`: the
// node it joined through (another daemon's), else "local" with a stream here, "-" if not
// joined, "?" if joined but unknown.
std::string RankNode(const DaemonStatus& status, const JobStatus& job, const RankProgress& rank);

// One line per job under a header, or "no jobs".
void PrintJobs(const DaemonStatus& status, std::FILE* out);

// The job's details and a table of its ranks on `out`; returns 0. An unknown job:
// "emberctl: job 'ID' not found" with the known jobs (if at most 8) on `err`, returns 1.
int InspectJob(const DaemonStatus& status, const std::string& job, std::FILE* out,
               std::FILE* err);

}  // namespace ember::emberctl

#endif  // EMBER_TOOLS_EMBERCTL_JOBS_COMMAND_H_
