// Test helpers for tests that run other binaries: where a data dependency lies in the
// runfiles, starting a child process (posix_spawn, never fork: the test may have threads)
// and waiting for it with a deadline. Shared by tests/ and sdk/sync's multi-process tests;
// needs neither Catch2 nor LibTorch. Failures to spawn or wait throw std::runtime_error,
// which fails the calling test.
#ifndef EMBER_TESTS_SUPPORT_PROCESS_TESTING_H_
#define EMBER_TESTS_SUPPORT_PROCESS_TESTING_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace ember::testing {

// Path of a file in this test's runfiles ($TEST_SRCDIR/ember/<relative>), e.g.
// "daemon/emberd".
std::string Runfile(const std::string& workspace_relative);

// Starts `argv` with this process's environment plus `extra_env` ("NAME=value"); its
// stdout and stderr are appended to the given files (created if missing; the same path
// for both interleaves them), or inherited where a path is empty. Returns its pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
            const std::string& stdout_path = "", const std::string& stderr_path = "");

// Waits for `pid`; returns its wait status, or -1 if it is still running after `timeout`.
int WaitFor(pid_t pid, std::chrono::milliseconds timeout);

// As WaitFor, but a process still running after `timeout` is SIGKILLed and reaped; returns
// its wait status and sets *killed to whether it had to be killed.
int WaitOrKill(pid_t pid, std::chrono::milliseconds timeout, bool* killed);

// How a process that RunToExit ran ended: its exit code (-1: killed by a signal, or by
// RunToExit at the timeout) and everything it wrote to stdout and stderr.
struct ProcessOutput {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `argv` until it exits, SIGKILLing it after `timeout`; its stdout and stderr go to
// fresh files in `dir`. Thread-safe.
ProcessOutput RunToExit(const std::vector<std::string>& argv, const std::string& dir,
                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

// The whole file, or "" if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace ember::testing

#endif  // EMBER_TESTS_SUPPORT_PROCESS_TESTING_H_
