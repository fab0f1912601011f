#include "sdk/sync/worker_testing.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "common/temp_dir_testing.h"
#include "tests/support/process_testing.h"

namespace ember::sdk::testing {

std::string FreshTempPath(const std::string& name) {
  std::string path = TestTmpDir() + "/" + name;
  unlink(path.c_str());
  return path;
}

Worker SpawnWorker(const std::string& binary, const std::string& store, int rank, int world,
                   const std::vector<std::string>& extra) {
  Worker worker;
  worker.stderr_path = store + ".rank" + std::to_string(rank) + ".err";
  unlink(worker.stderr_path.c_str());
  std::vector<std::string> argv = {binary, "--store", store, "--rank", std::to_string(rank),
                                   "--world", std::to_string(world)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  worker.pid = ember::testing::Spawn(argv, {}, "", worker.stderr_path);
  return worker;
}

Outcome Wait(const Worker& worker, Clock::time_point start, std::chrono::seconds limit) {
  const auto left = std::max(Clock::duration::zero(), start + limit - Clock::now());
  bool killed = false;
  const int status = ember::testing::WaitOrKill(
      worker.pid, std::chrono::duration_cast<std::chrono::milliseconds>(left), &killed);
  Outcome outcome;
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  outcome.err = ember::testing::ReadFileOrEmpty(worker.stderr_path);
  if (killed) {
    outcome.err += "\n[killed by the test after " + std::to_string(limit.count()) + " s]";
    return outcome;
  }
  outcome.exited = WIFEXITED(status);
  outcome.exit_code = outcome.exited ? WEXITSTATUS(status) : -1;
  outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return outcome;
}

std::vector<Worker> SpawnWorkers(const std::string& binary, const std::string& store, int world,
                                 const std::vector<std::string>& extra) {
  std::vector<Worker> workers;
  for (int rank = 0; rank < world; ++rank) {
    workers.push_back(SpawnWorker(binary, store, rank, world, extra));
  }
  return workers;
}

void ExpectAllSucceed(const std::vector<Worker>& workers, Clock::time_point start,
                      std::chrono::seconds limit, const std::string& ok_text) {
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    Outcome outcome = Wait(workers[rank], start, limit);
    INFO("rank " << rank << " of " << workers.size() << " stderr:\n" << outcome.err);
    CHECK(outcome.exited);
    CHECK(outcome.exit_code == 0);
    CHECK(outcome.err.find(ok_text) != std::string::npos);
  }
}

std::pair<Outcome, pid_t> SurvivorOfKilledPeer(const std::string& binary,
                                               const std::string& store,
                                               const std::vector<std::string>& extra,
                                               std::chrono::seconds victim_limit,
                                               std::chrono::seconds survivor_limit) {
  const Clock::time_point start = Clock::now();
  Worker survivor = SpawnWorker(binary, store, 0, 2, extra);
  std::vector<std::string> victim_extra = extra;
  victim_extra.insert(victim_extra.end(), {"--die-after-step", "3"});
  Worker victim = SpawnWorker(binary, store, 1, 2, victim_extra);

  Outcome died = Wait(victim, start, victim_limit);
  {
    INFO("rank 1 stderr:\n" << died.err);
    CHECK(died.signal == SIGKILL);
    CHECK(died.err.find("killing itself after step 3") != std::string::npos);
  }
  Outcome outcome = Wait(survivor, Clock::now(), survivor_limit);
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.exited);
  CHECK(outcome.exit_code == 2);
  return {outcome, victim.pid};
}

}  // namespace ember::sdk::testing
