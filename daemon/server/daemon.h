// Daemon: emberd's composition root (in the manner of tf.data service's server_lib and
// LevelDB's DB::Open). It owns every subsystem, builds them in dependency order from a
// DaemonConfig and an Env, serves on its own event-loop thread until asked to stop, and
// shuts down in reverse order. main() parses flags, sets up logging and turns signals
// into Stop() and Reload(); tests start a Daemon in-process.
//
// Start-up, in order (each step's failure stops it and is Start's error):
//   plugins -> catalog (datasets probed) -> the unix socket's path checked (no other
//   emberd there) -> TLS keys -> the job journal replayed into the ledger -> stores,
//   decode pool, streams, service -> peer endpoint (<state_dir>/peer.port) -> metrics
//   endpoint (<state_dir>/metrics.port) -> the unix socket accepts -> READY=1 to systemd.
// So a client that can connect sees every job the journal held.
// Shutdown (Stop), in order: the socket stops accepting and new streams are refused;
// streams drain (the batches being written are published, at most drain_timeout); the
// proxies to other coordinators and the peer connections close; the client connections
// close (their streams with them); file work in flight finishes; the journal is synced;
// the socket and port files are removed.
//
// Thread-safety: Start, Stop, Reload, Wait and the accessors may be called from any
// thread but the daemon's own.
#ifndef EMBER_DAEMON_SERVER_DAEMON_H_
#define EMBER_DAEMON_SERVER_DAEMON_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <kj/async.h>

#include "common/env.h"
#include "common/mutex.h"
#include "daemon/config/config.h"
#include "ember/status.h"

namespace ember::daemon {

class Daemon {
 public:
  // Builds the subsystems of `config` on a new thread and returns once the unix socket
  // accepts, or with the first step's error (naming `config_source`, the config file or
  // "emberd", where the error is the config's), having released what it built.
  // `env` (not owned) must outlive the Daemon.
  static Result<std::unique_ptr<Daemon>> Start(Env* env, DaemonConfig config,
                                               std::string config_source = "emberd");
  // Stop()s and waits until the daemon has shut down.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts the shutdown (see above) and returns at once; `why` begins its log line
  // ("signal 15 received"). Idempotent.
  void Stop(const std::string& why = "asked to stop");

  // Waits until the daemon has shut down, at most `timeout`: the reason it stopped by
  // itself (kUnavailable: accepting connections failed) or OK once stopped as asked;
  // kDeadlineExceeded if it still runs.
  Status Wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());

  // Applies what may change live of `loaded` (the config file read again, flags over it;
  // daemon/config/config_reload.h) and logs each change and each refused key. Blocks
  // until applied; does nothing once the daemon stops.
  void Reload(const DaemonConfig& loaded);

  // The bound ports of the peer and metrics endpoints (0 where not configured).
  uint16_t peer_port() const { return peer_port_; }
  uint16_t metrics_port() const { return metrics_port_; }
  const std::string& socket_path() const { return socket_path_; }

 private:
  class Parts;  // the subsystems, on the daemon's thread
  Daemon() = default;
  void Run(Env* env, DaemonConfig config, std::string config_source);

  std::string socket_path_;
  uint16_t peer_port_ = 0;
  uint16_t metrics_port_ = 0;

  mutable Mutex mu_;
  CondVar changed_;
  std::optional<Status> started_ GUARDED_BY(mu_);  // set once start-up ends
  std::optional<Status> stopped_ GUARDED_BY(mu_);  // set once shut down
  std::optional<std::string> stop_why_ GUARDED_BY(mu_);  // once Stop is called
  // While the loop serves: the subsystems, what ends Serve, and the loop's executor (for
  // Reload).
  Parts* parts_ GUARDED_BY(mu_) = nullptr;
  kj::Own<kj::CrossThreadPromiseFulfiller<std::string>> stop_ GUARDED_BY(mu_);
  kj::Own<const kj::Executor> executor_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVER_DAEMON_H_
