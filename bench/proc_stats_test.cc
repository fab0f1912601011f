#include "bench/proc_stats.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <memory>

namespace ember::bench {
namespace {

TEST_CASE("a stat line gives the command name and utime + stime") {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  Result<ProcStat> stat = ParseProcStat(
      "42 (emberd (peer) 1) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0", "stat");
  REQUIRE(stat.ok());
  CHECK(stat->name == "emberd (peer) 1");
  CHECK(stat->cpu_seconds == Approx(300 / ticks));
  CHECK(ParseProcStat("42 emberd S 1", "stat").status().code() == StatusCode::kDataLoss);
  CHECK(ParseProcStat("42 (emberd) S 1 42", "stat").status().code() == StatusCode::kDataLoss);
}

TEST_CASE("this process's own figures read back") {
  std::unique_ptr<Env> env = NewPosixEnv();
  Result<ProcStat> self = ReadProcStat(*env, "/proc/" + std::to_string(getpid()) + "/stat");
  REQUIRE(self.ok());
  CHECK(self->cpu_seconds >= 0);
  CHECK(ProcKib(*env, getpid(), "status", "VmRSS") > 0);
  CHECK(ProcKib(*env, getpid(), "smaps_rollup", "Pss") > 0);
  CHECK(ProcKib(*env, getpid(), "status", "NoSuchField") == -1);
  CHECK(LoadAverage1(*env) >= 0);
  CHECK_FALSE(ReadProcStat(*env, "/proc/0/stat").ok());
}

}  // namespace
}  // namespace ember::bench
