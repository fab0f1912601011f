// Runs model_sync_worker as separate processes (one per rank) and reads their exit codes
// and stderr. This test does not link LibTorch: it only spawns and waits.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE(value != nullptr);
  return value;
}

std::string WorkerPath() { return Env("TEST_SRCDIR") + "/ember/sdk/model_sync_worker"; }

std::string TempPath(const std::string& name) {
  std::string path = Env("TEST_TMPDIR") + "/" + name;
  unlink(path.c_str());
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Worker {
  pid_t pid = -1;
  std::string stderr_path;
};

struct Outcome {
  bool exited = false;    // false: killed by a signal (or by us at the deadline)
  int exit_code = -1;
  int signal = 0;
  double seconds = 0;
  std::string err;
};

// Starts one rank with its stderr in a file. posix_spawn, never fork: the parent may
// have threads.
Worker Spawn(const std::string& store, int rank, int world, std::vector<std::string> extra) {
  Worker worker;
  worker.stderr_path = store + ".rank" + std::to_string(rank) + ".err";
  std::vector<std::string> args = {WorkerPath(),          "--store", store,
                                   "--rank",              std::to_string(rank),
                                   "--world",             std::to_string(world)};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  REQUIRE(posix_spawn_file_actions_init(&actions) == 0);
  REQUIRE(posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, worker.stderr_path.c_str(),
                                           O_WRONLY | O_CREAT | O_TRUNC, 0644) == 0);
  int rc = posix_spawn(&worker.pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  INFO("posix_spawn " << argv[0]);
  REQUIRE(rc == 0);
  return worker;
}

// Waits up to `limit` (from `start`); a worker still running then is killed and reported
// as not exited.
Outcome Wait(const Worker& worker, Clock::time_point start, std::chrono::seconds limit) {
  Outcome outcome;
  int status = 0;
  while (true) {
    pid_t done = waitpid(worker.pid, &status, WNOHANG);
    REQUIRE(done >= 0);
    if (done == worker.pid) break;
    if (Clock::now() - start > limit) {
      kill(worker.pid, SIGKILL);
      REQUIRE(waitpid(worker.pid, &status, 0) == worker.pid);
      outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      outcome.err = ReadFile(worker.stderr_path) + "\n[killed by the test after " +
                    std::to_string(limit.count()) + " s]";
      return outcome;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  outcome.exited = WIFEXITED(status);
  outcome.exit_code = outcome.exited ? WEXITSTATUS(status) : -1;
  outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  outcome.err = ReadFile(worker.stderr_path);
  return outcome;
}

void TrainAndExpectSuccess(int world) {
  const std::string store = TempPath("train" + std::to_string(world) + ".store");
  const Clock::time_point start = Clock::now();
  std::vector<Worker> workers;
  for (int rank = 0; rank < world; ++rank) {
    workers.push_back(Spawn(store, rank, world, {"--steps", "10", "--timeout-ms", "30000"}));
  }
  for (int rank = 0; rank < world; ++rank) {
    Outcome outcome = Wait(workers[rank], start, std::chrono::seconds(90));
    INFO("rank " << rank << " of " << world << " stderr:\n" << outcome.err);
    CHECK(outcome.exited);
    CHECK(outcome.exit_code == 0);
    CHECK(outcome.err.find("ok after 10 steps") != std::string::npos);
  }
}

TEST_CASE("two ranks stay bitwise identical and match single-process training") {
  TrainAndExpectSuccess(2);
}

TEST_CASE("three ranks stay bitwise identical and match single-process training") {
  TrainAndExpectSuccess(3);
}

TEST_CASE("a peer that never joins fails the rendezvous within the timeout") {
  const std::string store = TempPath("missing_peer.store");
  const Clock::time_point start = Clock::now();
  Worker lonely = Spawn(store, 0, 2, {"--timeout-ms", "2000"});
  Outcome outcome = Wait(lonely, start, std::chrono::seconds(20));
  INFO("stderr:\n" << outcome.err);
  CHECK(outcome.exited);
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.err.find("rendezvous failed") != std::string::npos);
  CHECK(outcome.seconds < 20);
}

TEST_CASE("a peer that dies mid-training makes the survivor fail, not hang") {
  const std::string store = TempPath("dying_peer.store");
  const Clock::time_point start = Clock::now();
  Worker survivor = Spawn(store, 0, 2, {"--timeout-ms", "3000"});
  Worker victim = Spawn(store, 1, 2, {"--timeout-ms", "3000", "--die-after-step", "3"});

  Outcome died = Wait(victim, start, std::chrono::seconds(60));
  INFO("rank 1 stderr:\n" << died.err);
  CHECK(died.signal == SIGKILL);
  CHECK(died.err.find("killing itself after step 3") != std::string::npos);

  const Clock::time_point death = Clock::now();
  Outcome outcome = Wait(survivor, death, std::chrono::seconds(20));
  INFO("rank 0 stderr:\n" << outcome.err);
  CHECK(outcome.exited);
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.err.find("gloo") != std::string::npos);
}

TEST_CASE("ranks with different networks all fail the broadcast") {
  const std::string store = TempPath("wrong_shape.store");
  const Clock::time_point start = Clock::now();
  std::vector<Worker> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.push_back(Spawn(store, rank, 2, {"--timeout-ms", "10000", "--odd-rank", "1"}));
  }
  for (int rank = 0; rank < 2; ++rank) {
    Outcome outcome = Wait(workers[rank], start, std::chrono::seconds(60));
    INFO("rank " << rank << " stderr:\n" << outcome.err);
    CHECK(outcome.exited);
    CHECK(outcome.exit_code == 2);
    CHECK(outcome.err.find("the module differs from rank 0's on 1 rank(s)") != std::string::npos);
  }
}

}  // namespace
