#include "daemon/config/config_reload.h"

#include <functional>

namespace ember::daemon {

namespace {

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : " ") + part;
  return "[" + out + "]";
}

std::string TlsText(const DaemonConfig& config) {
  switch (config.tls) {
    case PeerTlsMode::kUnset:
      return "(unset)";
    case PeerTlsMode::kOff:
      return "off";
    case PeerTlsMode::kOn:
      break;
  }
  return "{cert: " + config.tls_files.cert_path + ", key: " + config.tls_files.key_path +
         ", ca: " + config.tls_files.ca_path + "}";
}

std::string OrNone(const std::string& text) { return text.empty() ? "(none)" : text; }

}  // namespace

std::string ByteSizeText(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes == 0 || bytes % 1024 != 0) return std::to_string(bytes) + " bytes";
  int unit = -1;
  while (unit + 1 < 4 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

std::string UserLimitsText(const UserLimits& l) {
  return "{shm_share: " + std::to_string(l.shm_share) + ", streams: " + std::to_string(l.streams) +
         ", datasets: " + std::to_string(l.datasets) + ", jobs: " + std::to_string(l.jobs) +
         ", connections: " + std::to_string(l.connections) +
         ", pending_segments: " + std::to_string(l.pending_segments) +
         ", dataset_memory: " + std::to_string(l.dataset_memory) + "}";
}

ConfigReload DiffConfigs(const DaemonConfig& running, const DaemonConfig& loaded,
                         const std::string& source) {
  ConfigReload reload;
  reload.config = running;
  // A live key: takes the loaded value.
  auto live = [&](const char* key, std::string before, std::string after,
                  const std::function<void(DaemonConfig&)>& take) {
    if (before == after) return;
    take(reload.config);
    reload.changes.push_back(std::string(key) + " " + before + " -> " + after);
  };
  // A key that needs a restart: keeps the running value.
  auto restart = [&](const char* key, const std::string& before, const std::string& after) {
    if (before == after) return;
    reload.refused.push_back(std::string(key) + ": changed in " + source + " to " + after +
                             ", needs a restart; kept " + before);
  };
  live("log_level", running.log_level, loaded.log_level,
       [&](DaemonConfig& c) { c.log_level = loaded.log_level; });
  live("shm_budget", ByteSizeText(running.shm_budget_bytes),
       ByteSizeText(loaded.shm_budget_bytes),
       [&](DaemonConfig& c) { c.shm_budget_bytes = loaded.shm_budget_bytes; });
  live("ring_slots", std::to_string(running.default_slots), std::to_string(loaded.default_slots),
       [&](DaemonConfig& c) { c.default_slots = loaded.default_slots; });
  live("job_fill_timeout", std::to_string(running.job_fill_timeout_s) + " s",
       std::to_string(loaded.job_fill_timeout_s) + " s",
       [&](DaemonConfig& c) { c.job_fill_timeout_s = loaded.job_fill_timeout_s; });
  live("drain_timeout", std::to_string(running.drain_timeout_s) + " s",
       std::to_string(loaded.drain_timeout_s) + " s",
       [&](DaemonConfig& c) { c.drain_timeout_s = loaded.drain_timeout_s; });
  live("idle_exit", std::to_string(running.idle_exit_s) + " s",
       std::to_string(loaded.idle_exit_s) + " s",
       [&](DaemonConfig& c) { c.idle_exit_s = loaded.idle_exit_s; });

  restart("socket", running.socket_path, loaded.socket_path);
  restart("state_dir", running.state_dir, loaded.state_dir);
  restart("cache_dir", OrNone(running.cache_dir), OrNone(loaded.cache_dir));
  restart("cache_limit", ByteSizeText(running.cache_limit_bytes),
          ByteSizeText(loaded.cache_limit_bytes));
  restart("cache_prefetch_steps", std::to_string(running.cache_prefetch_steps),
          std::to_string(loaded.cache_prefetch_steps));
  restart("share_window", std::to_string(running.share_window),
          std::to_string(loaded.share_window));
  restart("lend_decode", running.lend_decode ? "true" : "false",
          loaded.lend_decode ? "true" : "false");
  restart("cache_eviction", running.cache_eviction, loaded.cache_eviction);
  restart("decode_threads", std::to_string(running.decode_threads),
          std::to_string(loaded.decode_threads));
  restart("plugins", Joined(running.plugin_paths), Joined(loaded.plugin_paths));
  restart("decode_workers", Joined(running.decode_workers), Joined(loaded.decode_workers));
  restart("listen", OrNone(running.listen), OrNone(loaded.listen));
  restart("tls", TlsText(running), TlsText(loaded));
  restart("node", OrNone(running.node_name), OrNone(loaded.node_name));
  restart("peer_threads", std::to_string(running.peer_threads),
          std::to_string(loaded.peer_threads));
  restart("reconnect_timeout", std::to_string(running.reconnect_timeout_s) + " s",
          std::to_string(loaded.reconnect_timeout_s) + " s");
  restart("user_limits", UserLimitsText(running.user_limits),
          UserLimitsText(loaded.user_limits));
  restart("share_group", OrNone(running.share_group), OrNone(loaded.share_group));
  return reload;
}

std::string DescribeChanges(const ConfigReload& reload) {
  if (reload.changes.empty()) return "reload: nothing changed";
  std::string out = "reload: ";
  for (size_t i = 0; i < reload.changes.size(); ++i)
    out += (i == 0 ? "" : ", ") + reload.changes[i];
  return out;
}

}  // namespace ember::daemon
