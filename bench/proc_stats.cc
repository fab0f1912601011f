#include "bench/proc_stats.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <vector>

namespace ember::bench {

Result<ProcStat> ParseProcStat(const std::string& text, const std::string& path) {
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open)
    return DataLoss(path + ": no '(name)' in '" + text.substr(0, 64) + "'");
  ProcStat stat;
  stat.name = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> fields;  // fields[0] is the file's field 3 (state)
  for (std::string f; rest >> f;) fields.push_back(f);
  if (fields.size() < 13)
    return DataLoss(path + ": " + std::to_string(fields.size() + 2) +
                    " fields, expected utime and stime (14, 15)");
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  stat.cpu_seconds = (std::strtod(fields[11].c_str(), nullptr) +
                      std::strtod(fields[12].c_str(), nullptr)) / ticks;
  return stat;
}

Result<ProcStat> ReadProcStat(Env& env, const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
  return ParseProcStat(text, path);
}

long ProcKib(Env& env, int pid, const std::string& file, const std::string& field) {
  Result<std::string> text = env.ReadFile("/proc/" + std::to_string(pid) + "/" + file);
  if (!text.ok()) return -1;
  const std::string prefix = field + ":";
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return std::atol(line.c_str() + prefix.size());
  return -1;
}

double LoadAverage1(Env& env) {
  Result<std::string> text = env.ReadFile("/proc/loadavg");
  return text.ok() && !text->empty() ? std::strtod(text->c_str(), nullptr) : -1;
}

}  // namespace ember::bench
