// What the benchmarks read of another process in /proc (coordinator_scale, soak_driver):
// the CPU time and command name in a stat file, the "Key: N kB" fields of status and
// smaps_rollup, and the load average. Read through Env. Peak PSS summed over a run's
// processes is bench/measure.py's, not this.
#ifndef EMBER_BENCH_PROC_STATS_H_
#define EMBER_BENCH_PROC_STATS_H_

#include <string>

#include "common/env.h"
#include "ember/status.h"

namespace ember::bench {

struct ProcStat {
  std::string name;        // the command name, between the parentheses
  double cpu_seconds = 0;  // utime + stime
};

// /proc/PID/stat or /proc/PID/task/TID/stat. Errors: ReadFile's (the process is gone),
// kDataLoss "PATH: ..." if the text is not a stat line.
Result<ProcStat> ReadProcStat(Env& env, const std::string& path);
Result<ProcStat> ParseProcStat(const std::string& text, const std::string& path);

// The value of the "FIELD:" line of /proc/PID/FILE in KiB (FILE status: VmRSS, VmHWM,
// RssAnon; smaps_rollup: Pss); -1 if the file or the line is not there.
long ProcKib(Env& env, int pid, const std::string& file, const std::string& field);

// The 1-minute load average (/proc/loadavg); -1 if unreadable.
double LoadAverage1(Env& env);

}  // namespace ember::bench

#endif  // EMBER_BENCH_PROC_STATS_H_
