// `emberctl top`: the daemon's streams live in the terminal, one frame per interval, from
// two status samples taken that interval apart (the daemon's counters; rates are theirs
// over the interval).
//
// A frame: a line for the daemon (version, pid, uptime, open descriptors, resident
// memory, shared memory in use of its budget, counts), then a table of the streams,
// the most stalled first: each stream's job, rank, dataset, samples/s, MB/s (payload),
// ring fill, the share of the interval its trainer waited for data (STALL%, which the
// table is sorted by, then by total stall), its total stall seconds, and its decode
// errors / skipped samples. A stream that opened during the interval shows "-" for its
// rates. Then a line per job: world size, ranks joined, leases in flight, the slowest
// joined rank (as `emberctl jobs` names it) and how many batches it is behind the fastest.
#ifndef EMBER_TOOLS_EMBERCTL_TOP_COMMAND_H_
#define EMBER_TOOLS_EMBERCTL_TOP_COMMAND_H_

#include <chrono>
#include <cstdio>
#include <string>

#include "ember/client.h"

namespace ember::emberctl {

// One frame from `before` and `now`, sampled `seconds` apart (> 0).
std::string RenderTop(const DaemonStatus& before, const DaemonStatus& now, double seconds);

struct TopOptions {
  std::chrono::milliseconds interval{1000};
  bool once = false;  // one frame (after one interval), then return
};

// Samples the status every interval and writes a frame to `out` each time (clearing the
// terminal first when `out` is one), until a status call fails (its error on `err`,
// returns 1) or, with `once`, after the first frame (returns 0). Blocks.
int RunTop(Client& client, const TopOptions& options, std::FILE* out, std::FILE* err);

}  // namespace ember::emberctl

#endif  // EMBER_TOOLS_EMBERCTL_TOP_COMMAND_H_
