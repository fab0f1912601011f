// Test helper: runs a worker binary as a separate process per rank (through
// tests/support/process_testing.h) with its stderr in a file, and waits for it with a
// deadline. Used by the multi-process tests of sdk/sync; does not link LibTorch.
#ifndef EMBER_SDK_SYNC_WORKER_TESTING_H_
#define EMBER_SDK_SYNC_WORKER_TESTING_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace ember::sdk::testing {

using Clock = std::chrono::steady_clock;

struct Worker {
  pid_t pid = -1;
  std::string stderr_path;
};

struct Outcome {
  bool exited = false;  // false: killed by a signal (or by Wait at the deadline)
  int exit_code = -1;
  int signal = 0;
  double seconds = 0;  // from the `start` given to Wait
  std::string err;
};

// $TEST_TMPDIR/<name>, removed if it exists.
std::string FreshTempPath(const std::string& name);

// Starts `binary --store <store> --rank <rank> --world <world> <extra...>`, its stderr
// in "<store>.rank<rank>.err" (replaced if it exists). Fails the current Catch2 test if
// it cannot.
Worker SpawnWorker(const std::string& binary, const std::string& store, int rank, int world,
                   const std::vector<std::string>& extra);

// Waits until `limit` after `start`; a worker still running then is SIGKILLed and
// reported as not exited.
Outcome Wait(const Worker& worker, Clock::time_point start, std::chrono::seconds limit);

// Starts ranks 0 .. world-1 of `binary`, all with the same `extra` flags.
std::vector<Worker> SpawnWorkers(const std::string& binary, const std::string& store, int world,
                                 const std::vector<std::string>& extra);

// Waits for every worker (until `limit` after `start`) and checks, as part of the current
// Catch2 test, that each exited with 0 and wrote `ok_text` to its stderr.
void ExpectAllSucceed(const std::vector<Worker>& workers, Clock::time_point start,
                      std::chrono::seconds limit, const std::string& ok_text);

// Starts rank 0 of 2 with `extra` and rank 1 with `extra` and --die-after-step 3, and
// checks, as part of the current Catch2 test, that rank 1 killed itself after step 3
// (within `victim_limit`) and that rank 0 then exited with 2 (within `survivor_limit` of
// that). Returns rank 0's outcome, its seconds counted from rank 1's death, and rank 1's
// pid.
std::pair<Outcome, pid_t> SurvivorOfKilledPeer(const std::string& binary,
                                               const std::string& store,
                                               const std::vector<std::string>& extra,
                                               std::chrono::seconds victim_limit,
                                               std::chrono::seconds survivor_limit);

}  // namespace ember::sdk::testing

#endif  // EMBER_SDK_SYNC_WORKER_TESTING_H_
