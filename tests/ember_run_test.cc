// ember-run as a process: its flag checks, the environment its ranks get on one node of
// several, restarting all local ranks after a failure (--max-restarts), and signals. The
// ranks are /bin/sh scripts that write what they saw into the test's directory ($1).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir_testing.h"
#include "tests/support/process_testing.h"

namespace ember::testing {
namespace {

using std::chrono::seconds;

// ember-run `flags` -- /bin/sh -c `script` sh `dir`, to its exit.
ProcessOutput EmberRun(const std::vector<std::string>& flags, const std::string& script,
                       const std::string& dir) {
  std::vector<std::string> argv = {Runfile("tools/ember_run/ember-run")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", script, "sh", dir});
  return RunToExit(argv, dir, seconds(60));
}

int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("ember-run refuses bad flags, naming them, and starts no rank") {
  const std::string dir = FreshTestDir("flags");
  const std::string touch = "touch \"$1/started\"";
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--nproc", "1", "--nnodes", "2", "--node-rank", "2", "--job", "j"},
       "ember-run: --node-rank 2 is not in 0..1 (--nnodes 2)"},
      {{"--nproc", "1", "--nnodes", "2", "--node-rank", "1"},
       "ember-run: --job is required with --nnodes 2"},
      {{"--nproc", "1", "--coordinator", "node0"},
       "ember-run: --coordinator='node0' is not HOST:PORT: no ':PORT'"},
      {{"--nproc", "1", "--coordinator", "node0:99999"},
       "ember-run: --coordinator='node0:99999' is not HOST:PORT: the port '99999' is not in "
       "1..65535"},
      {{"--nproc", "0"}, "--nproc"},
      {{"--nproc", "1", "--nnodes", "0"}, "--nnodes"},
      {{"--nproc", "1", "--node-rank", "-1"}, "--node-rank"},
      {{"--nproc", "1", "--max-restarts", "-1"}, "--max-restarts"},
      {{"--nproc", "1", "--max-restarts", "two"}, "--max-restarts"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    const ProcessOutput run = EmberRun(c.flags, touch, dir);
    INFO(run.err);
    CHECK(run.exit_code > 0);
    CHECK(Contains(run.err, c.message));
  }
  const std::string started = dir + "/started";
  CHECK(access(started.c_str(), F_OK) != 0);
  CHECK(EmberRun({"--nproc", "1"}, touch, dir).exit_code == 0);  // the script can start
  CHECK(access(started.c_str(), F_OK) == 0);
}

TEST_CASE("ember-run --nnodes 2 --node-rank 1 gives its ranks the second half of the world") {
  const std::string dir = FreshTestDir("multi");
  const std::string script = "env | grep ^EMBER_ | sort > \"$1/env.$EMBER_LOCAL_RANK\"";
  const ProcessOutput run =
      EmberRun({"--nnodes", "2", "--node-rank", "1", "--nproc", "2", "--coordinator",
                "node0.example:7070", "--job", "big", "--socket", "/run/e.sock"},
               script, dir);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  for (int local = 0; local < 2; ++local) {
    INFO("local rank " << local);
    CHECK(ReadFileOrEmpty(dir + "/env." + std::to_string(local)) ==
          "EMBER_COORDINATOR=node0.example:7070\n"
          "EMBER_JOB=big\n"
          "EMBER_LOCAL_RANK=" +
              std::to_string(local) +
              "\n"
              "EMBER_LOCAL_WORLD_SIZE=2\n"
              "EMBER_NNODES=2\n"
              "EMBER_NODE_RANK=1\n"
              "EMBER_RANK=" +
              std::to_string(2 + local) +
              "\n"
              "EMBER_RESTART_COUNT=0\n"
              "EMBER_SOCKET=/run/e.sock\n"
              "EMBER_WORLD_SIZE=4\n");
  }

  const ProcessOutput single = EmberRun({"--nproc", "1", "--job", "one"}, script, dir);
  REQUIRE(single.exit_code == 0);
  const std::string env = ReadFileOrEmpty(dir + "/env.0");
  INFO(env);
  CHECK_FALSE(Contains(env, "EMBER_COORDINATOR"));  // only when given
  CHECK(Contains(env, "EMBER_NNODES=1\n"));
  CHECK(Contains(env, "EMBER_RANK=0\n"));
  CHECK(Contains(env, "EMBER_WORLD_SIZE=1\n"));
}

TEST_CASE("ember-run --max-restarts restarts all local ranks with EMBER_RESTART_COUNT + 1") {
  const std::string dir = FreshTestDir("restart");
  // On the first run local rank 1 fails and rank 0 would sleep for a minute; on the second
  // both succeed.
  const std::string script =
      "if [ \"$EMBER_RESTART_COUNT\" = 0 ]; then"
      "  if [ \"$EMBER_LOCAL_RANK\" = 1 ]; then sleep 0.2; exit 3; fi; exec sleep 60; "
      "fi; echo \"$EMBER_RESTART_COUNT\" > \"$1/done.$EMBER_LOCAL_RANK\"";
  const auto start = std::chrono::steady_clock::now();
  const ProcessOutput run = EmberRun({"--nproc", "2", "--max-restarts", "2"}, script, dir);
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(std::chrono::steady_clock::now() - start < seconds(30));
  CHECK(ReadFileOrEmpty(dir + "/done.0") == "1\n");
  CHECK(ReadFileOrEmpty(dir + "/done.1") == "1\n");
  CHECK(Contains(run.err, "rank 1 (pid "));
  CHECK(Contains(run.err, "exited with code 3; restarting all 2 local ranks (restart 1 of 2)"));
  CHECK_FALSE(Contains(run.err, "restart 2 of 2"));
}

TEST_CASE("ember-run past --max-restarts exits with the rank's status, naming it") {
  const std::string dir = FreshTestDir("exhausted");
  const ProcessOutput run = EmberRun({"--nproc", "1", "--max-restarts", "2", "--job", "t"},
                                     "echo \"$EMBER_RESTART_COUNT\" >> \"$1/runs\"; exit 5", dir);
  INFO(run.err);
  CHECK(run.exit_code == 5);
  CHECK(ReadFileOrEmpty(dir + "/runs") == "0\n1\n2\n");
  CHECK(Contains(run.err, "job 't' failed: rank 0 (pid "));
  CHECK(Contains(run.err, "exited with code 5 after 2 of 2 restarts"));

  // Killed by a signal: 128 + the signal, named; without --max-restarts no second run. Rank 1
  // kills itself once both ranks have written their line.
  const ProcessOutput killed =
      EmberRun({"--nproc", "2"},
               "echo x >> \"$1/killed_runs\"; if [ \"$EMBER_LOCAL_RANK\" = 1 ]; then"
               "  until [ \"$(wc -l < \"$1/killed_runs\")\" -ge 2 ]; do sleep 0.02; done;"
               "  kill -KILL $$; "
               "fi; exec sleep 60",
               dir);
  INFO(killed.err);
  CHECK(killed.exit_code == 128 + SIGKILL);
  CHECK(Lines(ReadFileOrEmpty(dir + "/killed_runs")) == 2);
  CHECK(Contains(killed.err, "rank 1 (pid "));
  CHECK(Contains(killed.err, "was killed by signal 9"));
}

TEST_CASE("ember-run forwards SIGTERM, restarts nothing, and SIGKILLs ranks after the grace") {
  const std::string dir = FreshTestDir("signal");
  const std::string runs = dir + "/runs";
  // The ranks ignore SIGTERM, so only SIGKILL ends them.
  pid_t run = Spawn({Runfile("tools/ember_run/ember-run"), "--nproc", "2", "--max-restarts", "3",
                     "--grace-seconds", "0.5", "--", "/bin/sh", "-c",
                     "trap '' TERM; echo x >> \"$1/runs\"; exec sleep 60", "sh", dir},
                    {}, "", dir + "/signal.err");
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (Lines(ReadFileOrEmpty(runs)) < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(Lines(ReadFileOrEmpty(runs)) == 2);
  REQUIRE(kill(run, SIGTERM) == 0);
  const int status = WaitFor(run, seconds(20));
  const std::string err = ReadFileOrEmpty(dir + "/signal.err");
  INFO(err);
  REQUIRE(status != -1);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  CHECK(Contains(err, "forwarding signal 15"));
  CHECK(Contains(err, "sending SIGKILL"));
  CHECK(Lines(ReadFileOrEmpty(runs)) == 2);
}

}  // namespace
}  // namespace ember::testing
