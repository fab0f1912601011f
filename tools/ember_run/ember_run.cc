// ember-run: starts N local ranks of a training program, in the spirit of torchrun.
//
//   ember-run --nproc 2 [--job NAME] [--socket PATH] -- PROGRAM ARGS...
//
// Each rank gets EMBER_RANK, EMBER_WORLD_SIZE, EMBER_JOB and EMBER_SOCKET (and
// EMBER_LOCAL_RANK). SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When one
// rank fails, the others are stopped (SIGTERM, then SIGKILL after a grace period) and
// ember-run exits non-zero naming the rank and how it failed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

volatile sig_atomic_t g_forward_signal = 0;

void OnSignal(int sig) { g_forward_signal = sig; }

std::string DefaultJobName() {
  char stamp[32];
  time_t now = time(nullptr);
  strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
  return std::string("job-") + stamp + "-" + std::to_string(getpid());
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ember-run: start N local ranks of a training program"};
  int nproc = 1;
  std::string job, socket;
  double grace_seconds = 10;
  std::vector<std::string> command;
  app.add_option("--nproc", nproc, "ranks to start on this node")->required()->check(CLI::Range(1, 1024));
  app.add_option("--job", job, "job name shared by the ranks (default: unique per launch)");
  app.add_option("--socket", socket, "emberd's unix socket (default: $EMBER_SOCKET)");
  app.add_option("--grace-seconds", grace_seconds, "time ranks get to stop after SIGTERM")->capture_default_str();
  app.add_option("command", command, "PROGRAM ARGS... (after --)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (job.empty()) job = DefaultJobName();
  if (socket.empty() && std::getenv("EMBER_SOCKET") != nullptr) socket = std::getenv("EMBER_SOCKET");

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);

  std::vector<char*> args;
  for (auto& a : command) args.push_back(a.data());
  args.push_back(nullptr);

  std::vector<pid_t> pids(nproc, -1);
  for (int rank = 0; rank < nproc; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      std::cerr << "ember-run: fork failed: " << strerror(errno) << "\n";
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &dfl, nullptr);
      setenv("EMBER_RANK", std::to_string(rank).c_str(), 1);
      setenv("EMBER_LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("EMBER_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("EMBER_JOB", job.c_str(), 1);
      if (!socket.empty()) setenv("EMBER_SOCKET", socket.c_str(), 1);
      execvp(args[0], args.data());
      std::cerr << "ember-run: cannot start '" << args[0] << "': " << strerror(errno) << "\n";
      _exit(127);
    }
    pids[rank] = pid;
  }
  std::cerr << "ember-run: job '" << job << "': started " << nproc << " ranks\n";

  int running = nproc;
  int exit_code = 0;
  bool stopping = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  auto stop_all = [&](int sig) {
    for (pid_t p : pids)
      if (p > 0) kill(p, sig);
  };
  while (running > 0) {
    if (g_forward_signal != 0) {
      int sig = g_forward_signal;
      g_forward_signal = 0;
      std::cerr << "ember-run: forwarding signal " << sig << " to all ranks\n";
      stop_all(sig);
      if (!stopping) {
        stopping = true;
        exit_code = 128 + sig;
        deadline = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
      }
    }
    if (stopping && std::chrono::steady_clock::now() > deadline) {
      std::cerr << "ember-run: ranks still running after " << grace_seconds
                << " s; sending SIGKILL\n";
      stop_all(SIGKILL);
      deadline = std::chrono::steady_clock::time_point::max();
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0 || (pid < 0 && errno == EINTR)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (pid < 0) break;
    int rank = -1;
    for (int r = 0; r < nproc; ++r)
      if (pids[r] == pid) rank = r;
    if (rank < 0) continue;
    pids[rank] = -1;
    --running;
    const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed && !stopping) {
      std::cerr << "ember-run: rank " << rank << " (pid " << pid << ") " << Describe(status)
                << "; stopping the other " << running << " rank(s)\n";
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      stopping = true;
      stop_all(SIGTERM);
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
    }
  }
  if (exit_code != 0) std::cerr << "ember-run: job '" << job << "' failed\n";
  return exit_code;
}
