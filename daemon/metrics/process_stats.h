// What the daemon's process uses of the machine, for status and metrics: open file
// descriptors and resident memory, read from /proc through Env.
#ifndef EMBER_DAEMON_METRICS_PROCESS_STATS_H_
#define EMBER_DAEMON_METRICS_PROCESS_STATS_H_

#include <cstdint>
#include <string>

#include "common/env.h"
#include "ember/status.h"

namespace ember::daemon {

struct ProcessStats {
  uint64_t open_fds = 0;
  // Resident pages x page size: anonymous memory, mapped files and the pages of rings and
  // segments this process touched.
  uint64_t resident_bytes = 0;
};

// The calling process's stats: the entries of /proc/self/fd (less the one the listing
// itself opens) and the resident field of /proc/self/statm. Errors name the file (no
// /proc mounted, out of descriptors).
Result<ProcessStats> ReadProcessStats(Env& env);

// The resident bytes in the text of a statm file (`path` names it in errors): its second
// field, in pages of `page_size` bytes. kDataLoss "PATH: expected 'SIZE RESIDENT ...'
// pages, got '...'" if it is not there.
Result<uint64_t> ParseStatmResidentBytes(const std::string& text, uint64_t page_size,
                                         const std::string& path);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_METRICS_PROCESS_STATS_H_
