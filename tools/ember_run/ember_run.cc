// ember-run: starts the local ranks of a training program, in the spirit of torchrun.
//
//   ember-run --nproc M [--job NAME] [--socket PATH] -- PROGRAM ARGS...
//   ember-run --nnodes N --node-rank K --coordinator HOST:PORT --nproc M --job NAME
//             [--max-restarts R] -- PROGRAM ARGS...          (on each of the N nodes)
//   (--nproc M0,M1,...: a count per node, for uneven layouts; the same list everywhere)
//
// Each rank gets the variables of RankEnvironment (tools/ember_run/rank_env.h): EMBER_RANK
// K*M+i of EMBER_WORLD_SIZE N*M, EMBER_LOCAL_RANK i, EMBER_JOB, EMBER_RESTART_COUNT, ...
// SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When one rank fails (exits
// non-zero or is killed by a signal), the others are stopped (SIGTERM, then SIGKILL after
// --grace-seconds); then, up to --max-restarts times, all local ranks start again with
// EMBER_RESTART_COUNT one higher; past that, ember-run exits with the failed rank's status
// (128+signal for a signal), naming the rank and how it ended. Each node restarts its own
// ranks: ranks on other nodes see theirs fail (a collective, the job's store) and restart
// under their own ember-run.
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

#include "tools/ember_run/rank_env.h"

namespace ember::tools {
namespace {

using Clock = std::chrono::steady_clock;

// How long ranks that were sent SIGKILL get to be reaped before ember-run gives up on them.
constexpr std::chrono::seconds kReapDeadline{10};
constexpr std::chrono::milliseconds kPollInterval{20};

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

int ExitCodeOf(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// How one start of all local ranks ended.
struct Outcome {
  enum Kind { kSucceeded, kRankFailed, kSignalled, kUnreaped } kind = kSucceeded;
  int local_rank = -1;  // kRankFailed: the first rank that failed
  pid_t pid = -1;
  int status = 0;  // kRankFailed: its wait status
  int signal = 0;  // kSignalled: the signal forwarded
};

class Supervisor {
 public:
  Supervisor(const RunLayout& layout, std::vector<std::string> command,
             std::chrono::milliseconds grace)
      : layout_(layout), command_(std::move(command)), grace_(grace) {}

  // "rank 3 (local rank 1 on node 1, pid 42)", or "rank 1 (pid 42)" on one node.
  std::string Name(int local_rank, pid_t pid) const {
    const int rank = FirstRank(layout_) + local_rank;
    std::string name = "rank " + std::to_string(rank) + " (";
    if (layout_.nnodes > 1)
      name += "local rank " + std::to_string(local_rank) + " on node " +
              std::to_string(layout_.node_rank) + ", ";
    return name + "pid " + std::to_string(pid) + ")";
  }

  // Starts every local rank (run `restart_count`) and waits until all have exited, a rank
  // failed and the others were stopped, or a signal was forwarded and all stopped. Never
  // waits past the grace period and kReapDeadline once stopping began; false from a failed
  // fork (the ranks started are stopped first).
  bool RunOnce(int restart_count, Outcome* outcome) {
    pids_.assign(layout_.nproc, -1);
    stopping_ = killed_ = false;
    *outcome = Outcome{};
    for (int local = 0; local < layout_.nproc; ++local) {
      const pid_t pid = StartRank(local, restart_count);
      if (pid < 0) {
        std::cerr << "ember-run: fork failed: " << strerror(errno) << "\n";
        Stop(SIGTERM);
        Wait(outcome);
        return false;
      }
      pids_[local] = pid;
    }
    Wait(outcome);
    return true;
  }

 private:
  pid_t StartRank(int local_rank, int restart_count) {
    const auto env = RankEnvironment(layout_, local_rank, restart_count);
    std::vector<char*> args;
    for (auto& a : command_) args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid != 0) return pid;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &dfl, nullptr);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    execvp(args[0], args.data());
    std::cerr << "ember-run: cannot start '" << args[0] << "': " << strerror(errno) << "\n";
    _exit(127);
  }

  void Signal(int sig) {
    for (pid_t p : pids_)
      if (p > 0) kill(p, sig);
  }

  void Stop(int sig) {
    Signal(sig);
    if (!stopping_) {
      stopping_ = true;
      deadline_ = Clock::now() + grace_;
    }
  }

  int Running() const {
    int n = 0;
    for (pid_t p : pids_) n += p > 0;
    return n;
  }

  void Wait(Outcome* outcome) {
    while (Running() > 0) {
      if (g_forward_signal != 0) {
        const int sig = g_forward_signal;
        g_forward_signal = 0;
        std::cerr << "ember-run: forwarding signal " << sig << " to all ranks\n";
        if (outcome->kind != Outcome::kSignalled) {
          outcome->kind = Outcome::kSignalled;
          outcome->signal = sig;
        }
        Stop(sig);
      }
      if (stopping_ && !killed_ && Clock::now() > deadline_) {
        std::cerr << "ember-run: " << Running() << " rank(s) still running "
                  << grace_.count() / 1000.0 << " s after being told to stop; sending SIGKILL\n";
        Signal(SIGKILL);
        killed_ = true;
        deadline_ = Clock::now() + kReapDeadline;
      }
      if (killed_ && Clock::now() > deadline_) {
        for (int local = 0; local < layout_.nproc; ++local)
          if (pids_[local] > 0)
            std::cerr << "ember-run: " << Name(local, pids_[local]) << " has not exited "
                      << kReapDeadline.count() << " s after SIGKILL; giving up on it\n";
        outcome->kind = Outcome::kUnreaped;
        return;
      }
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) {
        std::this_thread::sleep_for(kPollInterval);
        continue;
      }
      if (pid < 0) {  // ECHILD: nothing left to wait for
        pids_.assign(pids_.size(), -1);
        return;
      }
      int local = -1;
      for (int r = 0; r < layout_.nproc; ++r)
        if (pids_[r] == pid) local = r;
      if (local < 0) continue;
      pids_[local] = -1;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && !stopping_) {
        std::cerr << "ember-run: " << Name(local, pid) << " " << Describe(status)
                  << "; stopping the other " << Running() << " rank(s)\n";
        *outcome = Outcome{Outcome::kRankFailed, local, pid, status, 0};
        Stop(SIGTERM);
      }
    }
  }

  const RunLayout layout_;
  std::vector<std::string> command_;
  const std::chrono::milliseconds grace_;
  std::vector<pid_t> pids_;  // by local rank; -1 once reaped
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point deadline_;
};

int Main(int argc, char** argv) {
  CLI::App app{"ember-run: start the local ranks of a training program"};
  RunLayout layout;
  int max_restarts = 0;
  double grace_seconds = 10;
  std::vector<std::string> command;
  std::string nproc;
  app.add_option("--nproc", nproc,
                 "ranks to start on this node: M (the same on every node) or M0,M1,... (one "
                 "count per node, the same list on every node)")
      ->required();
  app.add_option("--nnodes", layout.nnodes, "nodes of the run, each running one ember-run")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("--node-rank", layout.node_rank, "this node's index, 0..nnodes-1")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--coordinator", layout.coordinator,
                 "HOST:PORT of the emberd that coordinates the job (EMBER_COORDINATOR)");
  app.add_option("--job", layout.job,
                 "job name shared by the ranks (default: unique per launch; required with "
                 "--nnodes > 1)");
  app.add_option("--socket", layout.socket, "emberd's unix socket (default: $EMBER_SOCKET)");
  app.add_option("--max-restarts", max_restarts, "times to restart all local ranks after one fails")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--grace-seconds", grace_seconds, "time ranks get to stop after SIGTERM")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("command", command, "PROGRAM ARGS... (after --)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Status checked = ParseNproc(nproc, &layout);
  if (checked.ok()) checked = CheckRunLayout(&layout);
  if (!checked.ok()) {
    std::cerr << "ember-run: " << checked.message() << "\n";
    return 2;
  }
  if (layout.job.empty()) layout.job = DefaultJobName();
  if (layout.socket.empty() && std::getenv("EMBER_SOCKET") != nullptr)
    layout.socket = std::getenv("EMBER_SOCKET");

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);

  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
  Supervisor supervisor(layout, command, grace);
  std::string where = std::to_string(layout.nproc) + " ranks";
  if (layout.nnodes > 1)
    where +=
        " (node " + std::to_string(layout.node_rank) + " of " + std::to_string(layout.nnodes) + ")";
  for (int restart = 0;; ++restart) {
    std::cerr << "ember-run: job '" << layout.job << "': started " << where;
    if (restart > 0) std::cerr << ", restart " << restart << " of " << max_restarts;
    std::cerr << "\n";
    Outcome outcome;
    if (!supervisor.RunOnce(restart, &outcome)) return 1;
    switch (outcome.kind) {
      case Outcome::kSucceeded:
        return 0;
      case Outcome::kSignalled:
        std::cerr << "ember-run: job '" << layout.job << "' stopped by signal " << outcome.signal
                  << "\n";
        return 128 + outcome.signal;
      case Outcome::kUnreaped:
        std::cerr << "ember-run: job '" << layout.job << "' failed: ranks did not exit\n";
        return 1;
      case Outcome::kRankFailed:
        break;
    }
    const std::string failure =
        supervisor.Name(outcome.local_rank, outcome.pid) + " " + Describe(outcome.status);
    if (g_forward_signal != 0 || restart >= max_restarts) {
      std::cerr << "ember-run: job '" << layout.job << "' failed: " << failure;
      if (max_restarts > 0)
        std::cerr << " after " << restart << " of " << max_restarts << " restarts";
      std::cerr << "\n";
      return g_forward_signal != 0 ? 128 + g_forward_signal : ExitCodeOf(outcome.status);
    }
    std::cerr << "ember-run: " << failure << "; restarting all " << layout.nproc
              << " local ranks (restart " << restart + 1 << " of " << max_restarts << ")\n";
  }
}

}  // namespace
}  // namespace ember::tools

int main(int argc, char** argv) { return ember::tools::Main(argc, argv); }
