#include "sdk/sync/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

extern char** environ;

namespace ember::sdk::testing {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE(value != nullptr);
  return value;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string RunfilePath(const std::string& relative) {
  return Env("TEST_SRCDIR") + "/ember/" + relative;
}

std::string FreshTempPath(const std::string& name) {
  std::string path = Env("TEST_TMPDIR") + "/" + name;
  unlink(path.c_str());
  return path;
}

Worker Spawn(const std::string& binary, const std::string& store, int rank, int world,
             const std::vector<std::string>& extra) {
  Worker worker;
  worker.stderr_path = store + ".rank" + std::to_string(rank) + ".err";
  std::vector<std::string> args = {binary,   "--store",           store, "--rank",
                                   std::to_string(rank), "--world", std::to_string(world)};
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

}  // namespace ember::sdk::testing
