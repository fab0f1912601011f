// configs/emberd.service passes `systemd-analyze verify` (with ExecStart pointing at the
// emberd built here, since verify checks that the binary exists), and says what the
// service relies on: its own user, the socket group, the watchdog and reload.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <regex>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

constexpr const char* kSystemdAnalyze = "/usr/bin/systemd-analyze";

TEST_CASE("the unit passes systemd-analyze verify") {
  const std::string unit = ReadFileOrEmpty(Runfile("configs/emberd.service"));
  REQUIRE_FALSE(unit.empty());
  for (const char* line :
       {"\nUser=ember\n", "\nGroup=ember-users\n", "\nUMask=0007\n", "\nWatchdogSec=30\n",
        "\nType=notify\n", "\nExecReload=/bin/kill -HUP $MAINPID\n", "\nTimeoutStopSec=30\n",
        "\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n"}) {
    INFO(line);
    CHECK_THAT(unit, Catch::Contains(line));
  }
  if (access(kSystemdAnalyze, X_OK) != 0) {
    WARN(std::string(kSystemdAnalyze) + " is not installed (Debian package systemd): skipped "
         "verifying the unit");
    return;
  }
  TempDir tmp;
  const std::string copy = tmp.path() + "/emberd.service";
  {
    std::ofstream out(copy);
    out << std::regex_replace(unit, std::regex("/usr/local/bin/emberd"), Runfile("daemon/emberd"));
  }
  // Warnings (a bad value is only warned about) go to stderr, not to a journal.
  auto verify = [&](const std::string& path) {
    return RunToExit({"/usr/bin/env", "SYSTEMD_LOG_TARGET=console", kSystemdAnalyze, "verify", path},
                     tmp.path());
  };
  ProcessOutput good = verify(copy);
  INFO("stdout: " << good.out << "\nstderr: " << good.err);
  CHECK(good.exit_code == 0);
  CHECK(good.err.find("emberd.service") == std::string::npos);  // no warning about it

  // What verify catches, so that the check above means something.
  const std::string bad_value = tmp.path() + "/bad-value.service";
  {
    std::ofstream out(bad_value);
    out << ReadFileOrEmpty(copy) << "[Service]\nWatchdogSec=soon\n";
  }
  CHECK_THAT(verify(bad_value).err, Catch::Contains("Failed to parse sec value"));
  const std::string no_binary = tmp.path() + "/no-binary.service";
  {
    std::ofstream out(no_binary);
    out << std::regex_replace(unit, std::regex("/usr/local/bin/emberd"), tmp.path() + "/none");
  }
  ProcessOutput missing = verify(no_binary);
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.err, Catch::Contains("is not executable"));
}

}  // namespace
}  // namespace ember::testing
