#include "daemon/metrics/process_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

namespace ember::daemon {
namespace {

TEST_CASE("the descriptors a process opens are counted") {
  std::unique_ptr<Env> env = NewPosixEnv();
  Result<ProcessStats> before = ReadProcessStats(*env);
  REQUIRE(before.ok());
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  Result<ProcessStats> during = ReadProcessStats(*env);
  for (int fd : fds) close(fd);
  REQUIRE(during.ok());
  CHECK(during->open_fds == before->open_fds + 3);
  CHECK(before->open_fds >= 3);  // stdin, stdout, stderr at least
  CHECK(during->resident_bytes > 0);
}

TEST_CASE("resident memory is the statm file's second field in pages") {
  Result<uint64_t> bytes = ParseStatmResidentBytes("1000 250 30 4 0 120 0\n", 4096, "statm");
  REQUIRE(bytes.ok());
  CHECK(*bytes == 250 * 4096);
  for (const char* bad : {"", "1000", "1000 x 3", "-1 2"}) {
    Result<uint64_t> parsed = ParseStatmResidentBytes(bad, 4096, "/proc/self/statm");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kDataLoss);
    CHECK(parsed.status().message().find("/proc/self/statm: expected 'SIZE RESIDENT") == 0);
  }
}

}  // namespace
}  // namespace ember::daemon
