#include "tests/support/process_testing.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace ember::testing {
namespace {

[[noreturn]] void Die(const std::string& what) { throw std::runtime_error(what); }

}  // namespace

std::string Runfile(const std::string& workspace_relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) Die("TEST_SRCDIR is not set: run under bazel test");
  return std::string(srcdir) + "/ember/" + workspace_relative;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const std::string& stdout_path, const std::string& stderr_path) {
  if (argv.empty()) Die("Spawn: empty argv");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> env;
  for (auto& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  constexpr int kAppend = O_WRONLY | O_CREAT | O_APPEND;
  if (!stdout_path.empty())
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(), kAppend, 0644);
  if (!stderr_path.empty())
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), kAppend, 0644);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) Die("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

int WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) Die("waitpid " + std::to_string(pid) + ": " + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int WaitOrKill(pid_t pid, std::chrono::milliseconds timeout, bool* killed) {
  int status = WaitFor(pid, timeout);
  *killed = status == -1;
  if (*killed) {
    kill(pid, SIGKILL);
    if (waitpid(pid, &status, 0) != pid)
      Die("waitpid " + std::to_string(pid) + ": " + std::strerror(errno));
  }
  return status;
}

ProcessOutput RunToExit(const std::vector<std::string>& argv, const std::string& dir,
                        std::chrono::milliseconds timeout) {
  static std::atomic<int> runs{0};
  const std::string prefix = dir + "/run" + std::to_string(runs++);
  const std::string out_path = prefix + ".out", err_path = prefix + ".err";
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  bool killed = false;
  const int status = WaitOrKill(Spawn(argv, {}, out_path, err_path), timeout, &killed);
  ProcessOutput output;
  output.exit_code = !killed && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  output.out = ReadFileOrEmpty(out_path);
  output.err = ReadFileOrEmpty(err_path);
  return output;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ember::testing
