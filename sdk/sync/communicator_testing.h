// Test helper for the multi-process tests of sdk/sync: a Communicator without a daemon,
// and the flags and main() of the worker processes that use one (model_sync_test_worker,
// data_parallel_test_worker). "gloo" meets its peers in a c10d::FileStore at
// `store_path`; "shm" maps the file `store_path`.shm as the shared segment (every rank
// creates it if missing and sizes it; a fresh path per test gives a zero-filled segment).
#ifndef EMBER_SDK_SYNC_COMMUNICATOR_TESTING_H_
#define EMBER_SDK_SYNC_COMMUNICATOR_TESTING_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "ember/communicator.h"

namespace ember::sdk::testing {

// Throws c10::Error for an unknown backend or if the communicator cannot be made.
std::unique_ptr<Communicator> MakeTestCommunicator(const std::string& backend,
                                                   const std::string& store_path, int rank,
                                                   int world_size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name);

// The flags every worker takes: worker_testing.h's SpawnWorker passes --store, --rank and
// --world, the tests add the others.
struct WorkerFlags {
  std::string store_path;  // --store (required)
  std::string backend = "gloo";
  int rank = 0;        // --rank (required)
  int world_size = 1;  // --world (required)
  int steps = 10;
  int64_t timeout_ms = 30000;
  int die_after_step = 0;  // 0: never
};

// Adds --store, --backend (gloo or shm), --rank, --world, --steps, --timeout-ms and
// --die-after-step, writing into `flags` (which must outlive the parse).
void AddWorkerFlags(CLI::App& app, WorkerFlags& flags);

// MakeTestCommunicator of the flags' backend, store, rank, world and timeout.
std::unique_ptr<Communicator> MakeTestCommunicator(const WorkerFlags& flags,
                                                   const std::string& name);

// After optimizer step `step`: when it is --die-after-step, says so on stderr ("rank R:
// killing itself after step S as asked") and SIGKILLs this process.
void DieIfAsked(const WorkerFlags& flags, int step);

// The main() of a worker: parses argv into the flags of `app` (1 for a bad flag), then
// returns run()'s exit code, run with one torch thread. An exception out of run() is
// printed to stderr as "rank R: <message>" and ends the process with exit code 2 at once
// (_Exit: nothing waits for the threads of a communicator whose peers are gone).
int WorkerMain(CLI::App& app, int argc, char** argv, const WorkerFlags& flags,
               const std::function<int()>& run);

}  // namespace ember::sdk::testing

#endif  // EMBER_SDK_SYNC_COMMUNICATOR_TESTING_H_
