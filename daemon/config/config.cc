#include "daemon/config/config.h"

#include <string_view>

#include "common/strict_yaml.h"

namespace ember::daemon {

namespace {

constexpr uint32_t kMaxDecodeThreads = 1024;
constexpr uint32_t kMinSlots = 2;
constexpr uint32_t kMaxSlots = 1024;
// sockaddr_un::sun_path holds 108 bytes including the terminating NUL.
constexpr size_t kMaxSocketPathBytes = 107;

std::string Key(const std::string& key) { return "key '" + key + "'"; }

Result<DaemonConfig> ParseRoot(const StrictYaml& yaml, const YAML::Node& root) {
  DaemonConfig config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    return yaml.Error(root, "expected a map of keys at the top level, got " + DescribeYaml(root));
  }
  EMBER_RETURN_IF_ERROR(yaml.CheckKeys(root, "", {"socket", "state_dir", "decode_threads",
                                                  "shm_budget", "ring_slots", "log_level",
                                                  "plugins"}));
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    if (key == "socket") {
      EMBER_ASSIGN_OR_RETURN(config.socket_path, yaml.String(value, Key(key), "a path"));
      if (config.socket_path.size() > kMaxSocketPathBytes) {
        return yaml.Error(value, Key(key) + ": a unix socket path is at most " +
                                     std::to_string(kMaxSocketPathBytes) + " bytes, got " +
                                     std::to_string(config.socket_path.size()) + ": '" +
                                     config.socket_path + "'");
      }
    } else if (key == "state_dir") {
      EMBER_ASSIGN_OR_RETURN(config.state_dir, yaml.String(value, Key(key), "a directory"));
    } else if (key == "decode_threads") {
      EMBER_ASSIGN_OR_RETURN(config.decode_threads,
                             yaml.Unsigned(value, Key(key), 0, kMaxDecodeThreads));
    } else if (key == "shm_budget") {
      EMBER_ASSIGN_OR_RETURN(
          std::string text,
          yaml.String(value, Key(key), "a byte count such as 4GiB, 512MiB, 64KiB or 1000"));
      Result<uint64_t> bytes = ParseByteSize(text);
      if (!bytes.ok()) return yaml.Error(value, Key(key) + ": " + bytes.status().message());
      if (*bytes == 0) return yaml.Error(value, Key(key) + " must be positive, got '" + text + "'");
      config.shm_budget_bytes = *bytes;
    } else if (key == "ring_slots") {
      EMBER_ASSIGN_OR_RETURN(config.default_slots,
                             yaml.Unsigned(value, Key(key), kMinSlots, kMaxSlots));
    } else if (key == "log_level") {
      EMBER_RETURN_IF_ERROR(
          yaml.OneOf(value, Key(key), {"trace", "debug", "info", "warn", "error", "off"})
              .status());
      config.log_level = value.Scalar();
    } else if (key == "plugins") {
      if (!value.IsSequence()) {
        return yaml.Error(value, Key(key) + " must be a list of absolute paths, got " +
                                     DescribeYaml(value));
      }
      for (const YAML::Node& item : value) {
        EMBER_ASSIGN_OR_RETURN(std::string path, yaml.String(item, Key(key), "an absolute path"));
        if (path[0] != '/') {
          return yaml.Error(item, Key(key) + " must be an absolute path, got '" + path + "'");
        }
        config.plugin_paths.push_back(path);
      }
    }
  }
  return config;
}

}  // namespace

Result<uint64_t> ParseByteSize(const std::string& text) {
  struct Unit {
    std::string_view suffix;
    int shift;
  };
  static constexpr Unit kUnits[] = {{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  std::string_view digits = text;
  int shift = 0;
  for (const Unit& unit : kUnits) {
    if (digits.size() > unit.suffix.size() &&
        digits.substr(digits.size() - unit.suffix.size()) == unit.suffix) {
      digits.remove_suffix(unit.suffix.size());
      shift = unit.shift;
      break;
    }
  }
  uint64_t value = 0;
  if (!ParseDecimal(std::string(digits), &value)) {
    return InvalidArgument("expected a byte count such as 4GiB, 512MiB, 64KiB or 1000, got '" +
                           text + "'");
  }
  if (shift > 0 && value > (UINT64_MAX >> shift)) {
    return InvalidArgument("byte count '" + text + "' does not fit in 64 bits");
  }
  return value << shift;
}

Result<DaemonConfig> ParseConfig(const std::string& yaml_text, const std::string& source) {
  const StrictYaml yaml(source);
  return yaml.Parse(yaml_text, [&yaml](const YAML::Node& root) { return ParseRoot(yaml, root); });
}

Result<DaemonConfig> LoadConfig(Env& env, const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
  return ParseConfig(text, path);
}

}  // namespace ember::daemon
