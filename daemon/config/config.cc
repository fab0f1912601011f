#include "daemon/config/config.h"

#include "daemon/config/yaml_values.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <set>
#include <string_view>

namespace ember::daemon {

namespace {

constexpr const char* kKnownKeys =
    "socket, state_dir, decode_threads, shm_budget, ring_slots, log_level, plugins";
constexpr uint32_t kMaxDecodeThreads = 1024;
constexpr uint32_t kMinSlots = 2;
constexpr uint32_t kMaxSlots = 1024;
// sockaddr_un::sun_path holds 108 bytes including the terminating NUL.
constexpr size_t kMaxSocketPathBytes = 107;



class Parser {
 public:
  explicit Parser(const std::string& source) : source_(source) {}

  Status Error(const std::string& key, const std::string& what) const {
    return InvalidArgument(source_ + ": key '" + key + "': " + what);
  }

  Result<std::string> String(const std::string& key, const YAML::Node& node,
                             const char* expected) const {
    if (!node.IsScalar() || node.Scalar().empty()) {
      return Error(key, std::string("expected ") + expected + ", got " + DescribeNode(node));
    }
    return node.Scalar();
  }

  Result<uint32_t> Uint32(const std::string& key, const YAML::Node& node, uint32_t min,
                          uint32_t max) const {
    const std::string expected = min == 0 ? "a non-negative integer" : "an integer";
    uint64_t v = 0;
    if (!node.IsScalar() || !ParseDecimal(node.Scalar(), &v)) {
      return Error(key, "expected " + expected + ", got " + DescribeNode(node));
    }
    if (v < min || v > max) {
      return Error(key, "expected " + expected + " in " + std::to_string(min) + ".." +
                            std::to_string(max) + ", got '" + node.Scalar() + "'");
    }
    return static_cast<uint32_t>(v);
  }

 private:
  const std::string& source_;
};

Result<DaemonConfig> ParseRoot(const YAML::Node& root, const std::string& source) {
  DaemonConfig config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    return InvalidArgument(source + ": expected a map of keys at the top level, got " +
                           DescribeNode(root));
  }
  Parser parser(source);
  std::set<std::string> seen;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      return InvalidArgument(source + ": expected key names, got " + DescribeNode(entry.first));
    }
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    if (!seen.insert(key).second) {
      return InvalidArgument(source + ": key '" + key + "' is given more than once");
    }
    if (key == "socket") {
      EMBER_ASSIGN_OR_RETURN(config.socket_path, parser.String(key, value, "a path"));
      if (config.socket_path.size() > kMaxSocketPathBytes) {
        return parser.Error(key, "a unix socket path is at most " +
                                     std::to_string(kMaxSocketPathBytes) + " bytes, got " +
                                     std::to_string(config.socket_path.size()) + ": '" +
                                     config.socket_path + "'");
      }
    } else if (key == "state_dir") {
      EMBER_ASSIGN_OR_RETURN(config.state_dir, parser.String(key, value, "a directory"));
    } else if (key == "decode_threads") {
      EMBER_ASSIGN_OR_RETURN(config.decode_threads,
                             parser.Uint32(key, value, 0, kMaxDecodeThreads));
    } else if (key == "shm_budget") {
      const char* expected = "a byte count such as 4GiB, 512MiB, 64KiB or 1000";
      EMBER_ASSIGN_OR_RETURN(std::string text, parser.String(key, value, expected));
      Result<uint64_t> bytes = ParseByteSize(text);
      if (!bytes.ok()) return parser.Error(key, bytes.status().message());
      if (*bytes == 0) return parser.Error(key, "must be positive, got '" + text + "'");
      config.shm_budget_bytes = *bytes;
    } else if (key == "ring_slots") {
      EMBER_ASSIGN_OR_RETURN(config.default_slots, parser.Uint32(key, value, kMinSlots, kMaxSlots));
    } else if (key == "log_level") {
      const char* expected = "one of trace, debug, info, warn, error, off";
      EMBER_ASSIGN_OR_RETURN(std::string level, parser.String(key, value, expected));
      static const std::set<std::string> kLevels = {"trace", "debug", "info",
                                                    "warn",  "error", "off"};
      if (kLevels.count(level) == 0) {
        return parser.Error(key, std::string("expected ") + expected + ", got '" + level + "'");
      }
      config.log_level = level;
    } else if (key == "plugins") {
      if (!value.IsSequence()) {
        return parser.Error(key, "expected a list of absolute paths, got " + DescribeNode(value));
      }
      for (const YAML::Node& item : value) {
        EMBER_ASSIGN_OR_RETURN(std::string path, parser.String(key, item, "an absolute path"));
        if (path[0] != '/') {
          return parser.Error(key, "expected an absolute path, got '" + path + "'");
        }
        config.plugin_paths.push_back(path);
      }
    } else {
      return InvalidArgument(source + ": unknown key '" + key + "' (known: " + kKnownKeys + ")");
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
  try {
    return ParseRoot(YAML::Load(yaml_text), source);
  } catch (const YAML::Exception& e) {
    std::string where;
    if (!e.mark.is_null()) {
      where = "line " + std::to_string(e.mark.line + 1) + ", column " +
              std::to_string(e.mark.column + 1) + ": ";
    }
    return InvalidArgument(source + ": " + where + e.msg);
  } catch (const std::exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
}

Result<DaemonConfig> LoadConfig(Env& env, const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
  return ParseConfig(text, path);
}

}  // namespace ember::daemon
