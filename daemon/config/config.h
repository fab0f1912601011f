// emberd's configuration file (YAML). configs/emberd.yaml documents every key.
// Unknown keys and bad values are rejected with the key's name and the file.
#ifndef EMBER_DAEMON_CONFIG_CONFIG_H_
#define EMBER_DAEMON_CONFIG_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/env.h"
#include "ember/status.h"

namespace ember::daemon {

struct DaemonConfig {
  std::string socket_path = "/run/ember/emberd.sock";  // key: socket
  std::string state_dir = "/var/lib/ember";            // key: state_dir
  uint32_t decode_threads = 0;            // key: decode_threads; 0 = one per core
  uint64_t shm_budget_bytes = 4ull << 30; // key: shm_budget; integer bytes or "512MiB", "4GiB"
  uint32_t default_slots = 8;             // key: ring_slots; 2..1024
  std::string log_level = "info";         // key: log_level; trace|debug|info|warn|error|off
  // key: plugins; absolute paths of dataset-format plugin libraries (ember/plugin.h),
  // the only ones emberd loads.
  std::vector<std::string> plugin_paths;
};

// Parses YAML text; `source` names it in errors, with the place (common/strict_yaml.h):
//   "emberd.yaml: line 3, column 17: key 'decode_threads' must be a whole number in
//    0..1024, got 'many'"
// An empty document gives the defaults. kInvalidArgument on any unknown or repeated key,
// wrong type or out-of-range value.
Result<DaemonConfig> ParseConfig(const std::string& yaml_text, const std::string& source);

// Reads `path` through env and parses it.
Result<DaemonConfig> LoadConfig(Env& env, const std::string& path);

// "4GiB" / "512MiB" / "64KiB" / "1000" -> bytes; kInvalidArgument otherwise.
Result<uint64_t> ParseByteSize(const std::string& text);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CONFIG_CONFIG_H_
