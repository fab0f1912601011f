// What a reloaded config file (SIGHUP) changes in a running emberd. Transport-free: main
// applies the result; this only compares two configs.
//
// Live keys take effect at once: log_level, shm_budget (streams opened from then on; a
// smaller budget closes no stream), ring_slots (the default depth of new streams) and
// job_fill_timeout (the next expiry check) and drain_timeout. Every other key (socket, state_dir,
// decode_threads, plugins, listen, tls, node, reconnect_timeout) needs a restart: a
// change to one is refused and the running value kept.
#ifndef EMBER_DAEMON_CONFIG_CONFIG_RELOAD_H_
#define EMBER_DAEMON_CONFIG_CONFIG_RELOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/config/config.h"

namespace ember::daemon {

struct ConfigReload {
  // The running config with the live keys' new values; the others unchanged.
  DaemonConfig config;
  // One line per live key that changed: "log_level info -> debug",
  // "shm_budget 1 GiB -> 2 GiB".
  std::vector<std::string> changes;
  // One line per restart-only key that changed: "socket: changed in /etc/ember/emberd.yaml,
  // needs a restart; kept /run/ember/emberd.sock".
  std::vector<std::string> refused;
};

// Compares `running` with `loaded` (read from `source`, flags applied over it).
ConfigReload DiffConfigs(const DaemonConfig& running, const DaemonConfig& loaded,
                         const std::string& source);

// "reload: log_level info -> debug, shm_budget 1 GiB -> 2 GiB", or "reload: nothing
// changed" when there are no changes.
std::string DescribeChanges(const ConfigReload& reload);

// Bytes as the config writes them: "4 GiB", "1536 MiB", "1000 bytes" (the largest binary
// unit that divides them exactly).
std::string ByteSizeText(uint64_t bytes);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CONFIG_CONFIG_RELOAD_H_
