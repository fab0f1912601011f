#include "daemon/metrics/process_stats.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <vector>

namespace ember::daemon {

Result<uint64_t> ParseStatmResidentBytes(const std::string& text, uint64_t page_size,
                                         const std::string& path) {
  std::istringstream in(text);
  std::string size, resident;
  in >> size >> resident;
  const auto is_number = [](const std::string& s) {
    return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!is_number(size) || !is_number(resident))
    return DataLoss(path + ": expected 'SIZE RESIDENT ...' pages, got '" + text.substr(0, 64) +
                    "'");
  return std::strtoull(resident.c_str(), nullptr, 10) * page_size;
}

Result<ProcessStats> ReadProcessStats(Env& env) {
  ProcessStats stats;
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> fds, env.ListDir("/proc/self/fd"));
  stats.open_fds = fds.empty() ? 0 : fds.size() - 1;
  const std::string statm = "/proc/self/statm";
  EMBER_ASSIGN_OR_RETURN(std::string text, env.ReadFile(statm));
  EMBER_ASSIGN_OR_RETURN(stats.resident_bytes,
                         ParseStatmResidentBytes(text, sysconf(_SC_PAGESIZE), statm));
  return stats;
}

}  // namespace ember::daemon
