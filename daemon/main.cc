// emberd: flags, logging and signals only. The Daemon (daemon/server/daemon.h) builds and
// serves everything; SIGTERM / SIGINT stop it (draining first), SIGHUP reloads the live
// keys of the config file (daemon/config/config_reload.h).
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/env.h"
#include "daemon/config/config.h"
#include "daemon/peer/host_port.h"
#include "daemon/server/daemon.h"

namespace ember::daemon {
namespace {

// A config file (none: DaemonConfig's defaults, which configs/emberd.yaml documents) and
// the settings given as flags, which override it.
struct CommandLine {
  std::string config_path;
  std::optional<std::string> socket_path, state_dir, log_level, listen;
  std::optional<uint32_t> decode_threads, default_slots, idle_exit_s;
  std::optional<uint64_t> shm_budget_bytes;
};

// The file's settings (if any) with the flags' over them; the file's errors name it and
// the key. Flag values were checked while parsing.
Result<DaemonConfig> ResolveConfig(Env& env, const CommandLine& cli) {
  DaemonConfig config;
  if (!cli.config_path.empty()) {
    EMBER_ASSIGN_OR_RETURN(config, LoadConfig(env, cli.config_path));
  }
  if (cli.socket_path) config.socket_path = *cli.socket_path;
  if (cli.state_dir) config.state_dir = *cli.state_dir;
  if (cli.decode_threads) config.decode_threads = *cli.decode_threads;
  if (cli.shm_budget_bytes) config.shm_budget_bytes = *cli.shm_budget_bytes;
  if (cli.default_slots) config.default_slots = *cli.default_slots;
  if (cli.log_level) config.log_level = *cli.log_level;
  if (cli.idle_exit_s) config.idle_exit_s = *cli.idle_exit_s;
  if (cli.listen) {
    config.listen = *cli.listen;
    Status tls = CheckListenHasTls(config);
    if (!tls.ok()) return InvalidArgument("--listen: " + tls.message());
  }
  return config;
}

// Serves until SIGTERM or SIGINT. The three signals are blocked in every thread and taken
// by one thread with sigwait, which stops or reloads the daemon.
int Serve(const CommandLine& cli) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts
  std::unique_ptr<Env> env = NewPosixEnv();
  Result<DaemonConfig> config = ResolveConfig(*env, cli);
  if (!config.ok()) {
    spdlog::error("{}", config.status().message());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  auto daemon = Daemon::Start(env.get(), *config,
                              cli.config_path.empty() ? "emberd" : cli.config_path);
  if (!daemon.ok()) {
    spdlog::error("{}", daemon.status().message());
    return 2;
  }
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    for (int sig = 0; sigwait(&signals, &sig) == 0 && !done.load();) {
      if (sig != SIGHUP) return (*daemon)->Stop("signal " + std::to_string(sig) + " received");
      if (cli.config_path.empty()) {
        spdlog::info("reload: no config file (--config) to read again; nothing changed");
        continue;
      }
      Result<DaemonConfig> loaded = ResolveConfig(*env, cli);
      if (loaded.ok())
        (*daemon)->Reload(*loaded);
      else
        spdlog::error("reload: {}; kept the running config", loaded.status().message());
    }
  });
  const Status served = (*daemon)->Wait();
  done.store(true);
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // wakes it if the daemon stopped itself
  signal_thread.join();
  return served.ok() ? 0 : 1;
}

}  // namespace
}  // namespace ember::daemon

int main(int argc, char** argv) {
  using ember::daemon::ParseByteSize;
  CLI::App app{"emberd: serves training data to PyTorch distributed training"};
  ember::daemon::CommandLine cli;
  app.add_option("-c,--config", cli.config_path,
                 "YAML config file (see configs/emberd.yaml); without one, the defaults "
                 "documented there");
  // Each flag overrides its config key.
  app.add_option("--socket", cli.socket_path, "unix socket to serve on (key: socket)");
  app.add_option("--state-dir", cli.state_dir, "directory of the catalog (key: state_dir)");
  app.add_option("--decode-threads", cli.decode_threads,
                 "decode threads, 0 = one per core (key: decode_threads)")
      ->check(CLI::Range(0u, 1024u));
  std::string shm_budget;
  CLI::Option* shm_budget_flag =
      app.add_option("--shm-budget", shm_budget,
                     "shared memory for all rings, e.g. 512MiB (key: shm_budget)")
          ->check([](const std::string& text) {
            auto bytes = ParseByteSize(text);
            if (!bytes.ok()) return bytes.status().message();
            return *bytes == 0 ? std::string("must be positive") : std::string();
          });
  app.add_option("--ring-slots", cli.default_slots, "slots per ring by default (key: ring_slots)")
      ->check(CLI::Range(2u, 1024u));
  app.add_option("--idle-exit", cli.idle_exit_s,
                 "stop once no client has been connected for this many seconds, 0 = never "
                 "(key: idle_exit)")
      ->check(CLI::Range(0u, 86400u));
  app.add_option("--log-level", cli.log_level, "least severe messages logged (key: log_level)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--listen", cli.listen,
                 "HOST:PORT of the TCP endpoint for other nodes' daemons, port 0 for any "
                 "free one; needs key tls in the config file (key: listen)")
      ->check([](const std::string& text) {
        auto address = ember::daemon::ParseHostPort(text);
        return address.ok() ? std::string() : address.status().message();
      });
  app.set_version_flag("--version", "emberd 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*shm_budget_flag) cli.shm_budget_bytes = *ParseByteSize(shm_budget);
  spdlog::set_default_logger(spdlog::stderr_color_mt("emberd"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  signal(SIGPIPE, SIG_IGN);
  return ember::daemon::Serve(cli);
}
