// Helpers for multi-process tests: a real emberd in a private directory, synthetic IDX
// data whose samples say who they are, and child processes.
#ifndef EMBER_TESTS_SUPPORT_TEST_ENV_H_
#define EMBER_TESTS_SUPPORT_TEST_ENV_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/client.h"

namespace ember::testing {

// Path of a file in this test's runfiles, e.g. "daemon/emberd".
std::string Runfile(const std::string& workspace_relative);

// A fresh directory under /tmp (short, so unix socket paths fit), removed with
// everything in it when the TempDir goes out of scope, also when a test fails.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes <dir>/<prefix>-images-idx3-ubyte.gz and <dir>/<prefix>-labels-idx1-ubyte.gz with
// `count` samples of rows x cols uint8 pixels. Sample i's first four pixels hold i
// (little-endian), the rest are (i + k) % 251; its label is i % 10. `prefix` is "train"
// or "t10k".
void WriteSyntheticIdx(const std::string& dir, const std::string& prefix, uint32_t count,
                       uint32_t rows = 28, uint32_t cols = 28);

// The sample id a synthetic image carries.
uint32_t SyntheticId(const uint8_t* image);

// Starts `argv` with extra environment entries ("NAME=value"); returns its pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
            const std::string& stdout_path = "", const std::string& stderr_path = "");

// Waits for `pid`; returns its wait status, or -1 if it is still running after `timeout`.
int WaitFor(pid_t pid, std::chrono::milliseconds timeout);

std::string ReadFileOrEmpty(const std::string& path);

// Open descriptors of a process, and how many of them are memfds.
int CountFds(pid_t pid);
int CountMemfds(pid_t pid);
// Mappings of memfd-backed memory in a process (from /proc/PID/maps).
int CountMemfdMappings(pid_t pid);

// A real emberd (the //daemon:emberd binary) with its own socket, state dir and log.
class Daemon {
 public:
  // `extra_config`: more YAML lines for its config file (e.g. "plugins: [...]\n").
  explicit Daemon(std::string dir, uint32_t ring_slots = 4, const std::string& extra_config = "");
  ~Daemon();  // stops it

  void Start();  // waits until it serves; fails the test with its log if it does not
  void Stop();   // SIGTERM, waits; fails the test if it does not exit cleanly
  void Kill();   // SIGKILL, waits

  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_; }
  std::string log() const { return ReadFileOrEmpty(log_path_); }

  std::unique_ptr<Client> Connect() const;

 private:
  std::string dir_;
  std::string socket_;
  std::string config_path_;
  std::string log_path_;
  pid_t pid_ = -1;
};

// Writes `count` synthetic train samples into daemon.dir(), starts the daemon, registers
// them as IDX dataset `name` (split "train") and returns a connected client. Fails the
// test (throws, with the daemon's log) if any step fails.
std::unique_ptr<Client> StartWithSyntheticDataset(Daemon& daemon, uint32_t count,
                                                  const std::string& name = "syn");

// Options for a single reader (rank 0 of 1) of `dataset`, shuffled, with seed 0 and the
// daemon's default ring depth. epochs 0: until the reader is destroyed.
StreamOptions ReaderOptions(const std::string& job, uint32_t batch_size, uint32_t epochs,
                            const std::string& dataset = "syn");

}  // namespace ember::testing

#endif  // EMBER_TESTS_SUPPORT_TEST_ENV_H_
