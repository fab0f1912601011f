// Helpers for multi-process tests: a real emberd in a private directory, synthetic IDX
// data whose samples say who they are, and (process_testing.h) child processes.
#ifndef EMBER_TESTS_SUPPORT_TEST_ENV_H_
#define EMBER_TESTS_SUPPORT_TEST_ENV_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ember/client.h"
#include "tests/support/process_testing.h"

namespace ember::testing {

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

// Polls `pred` every 20 ms until it holds or `timeout` has passed, and returns its last
// value: for what emberd does asynchronously (noticing a disconnect, releasing memory).
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// Writes <dir>/<prefix>-images-idx3-ubyte.gz and <dir>/<prefix>-labels-idx1-ubyte.gz with
// `count` samples of rows x cols uint8 pixels. Sample i's first four pixels hold i
// (little-endian), the rest are (i + k) % 251; its label is i % 10. `prefix` is "train"
// or "t10k".
void WriteSyntheticIdx(const std::string& dir, const std::string& prefix, uint32_t count,
                       uint32_t rows = 28, uint32_t cols = 28);

// The sample id a synthetic image carries.
uint32_t SyntheticId(const uint8_t* image);

// Open descriptors of a process, and how many of them are memfds.
int CountFds(pid_t pid);
int CountMemfds(pid_t pid);
// Mappings of memfd-backed memory in a process (from /proc/PID/maps).
int CountMemfdMappings(pid_t pid);

// A "<field>: <n> kB" figure of /proc/PID/<file> in KiB, e.g. ("status", "VmRSS"),
// ("status", "RssAnon"), ("smaps_rollup", "Pss"); -1 if it cannot be read.
long ProcKib(pid_t pid, const std::string& file, const std::string& field);
// Resident memory of a process in KiB (VmRSS); -1 if it cannot be read.
long RssKib(pid_t pid);

// Entries of a directory, leaving out names starting with '.'; -1 if it cannot be read.
int CountEntries(const std::string& dir);

// The command line of a private emberd (the //daemon:emberd binary, a data dependency)
// serving on <dir>/emberd.sock with its catalog in <dir>/state, 2 decode threads, a
// 256 MiB shared-memory budget, 4 ring slots and debug logging, all as flags and no
// config file; `extra_args` follow them.
std::vector<std::string> EmberdCommand(const std::string& dir,
                                       const std::vector<std::string>& extra_args = {});

// For settings that no emberd flag covers (plugins): writes `yaml` to <dir>/emberd.yaml
// and returns {"--config", <that path>}, to pass as extra arguments. The flags of
// EmberdCommand override the same keys of the file.
std::vector<std::string> WriteDaemonConfig(const std::string& dir, const std::string& yaml);

// A real emberd started by EmberdCommand(dir, extra_args), its output in <dir>/emberd.log.
class Daemon {
 public:
  // In a TempDir of its own, removed once the daemon is gone.
  Daemon();
  // `wrapper` goes before the command line, e.g. {"/usr/sbin/ip", "netns", "exec", "ns1"};
  // it must exec emberd in place (pid() is the process signalled and waited for).
  explicit Daemon(std::string dir, std::vector<std::string> extra_args = {},
                  std::vector<std::string> wrapper = {});
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
  explicit Daemon(std::unique_ptr<TempDir> own_dir);

  std::unique_ptr<TempDir> own_dir_;  // null when the caller chose the directory
  std::string dir_;
  std::vector<std::string> extra_args_;
  std::vector<std::string> wrapper_;
  std::string socket_;
  std::string log_path_;
  pid_t pid_ = -1;
};

// Writes `count` synthetic train samples into daemon.dir(), starts the daemon, registers
// them as IDX dataset `name` (split "train") and returns a connected client. Fails the
// test (throws, with the daemon's log) if any step fails.
std::unique_ptr<Client> StartWithSyntheticDataset(Daemon& daemon, uint32_t count,
                                                  const std::string& name = "syn");

// As StartWithSyntheticDataset, with a test split too: `train_count` samples as dataset
// "<name>-train" (split "train") and `test_count` others as "<name>-test" (split "test").
std::unique_ptr<Client> StartWithSyntheticSplits(Daemon& daemon, uint32_t train_count,
                                                 uint32_t test_count, const std::string& name);

// Options for a single reader (rank 0 of 1) of `dataset`, shuffled, with seed 0 and the
// daemon's default ring depth. epochs 0: until the reader is destroyed.
StreamOptions ReaderOptions(const std::string& job, uint32_t batch_size, uint32_t epochs,
                            const std::string& dataset = "syn");

}  // namespace ember::testing

#endif  // EMBER_TESTS_SUPPORT_TEST_ENV_H_
