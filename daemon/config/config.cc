#include "daemon/config/config.h"

#include <cstdlib>
#include <string_view>

#include "common/paths.h"
#include "common/strict_yaml.h"
#include "daemon/peer/host_port.h"

namespace ember::daemon {

namespace {

constexpr uint32_t kMaxDecodeThreads = 1024;
constexpr uint32_t kMinSlots = 2;
constexpr uint32_t kMaxSlots = 1024;
// sockaddr_un::sun_path holds 108 bytes including the terminating NUL.
constexpr size_t kMaxSocketPathBytes = 107;

constexpr size_t kMaxNodeNameBytes = 255;

std::string Key(const std::string& key) { return "key '" + key + "'"; }

// Where LoadConfig found the file: relative tls paths are resolved against `dir` (ending
// in '/'; empty: the working directory), and every tls file is read through `env`.
struct FileContext {
  Env* env;
  std::string dir;
};

// One of the tls files: `path` as written, resolved and checked when `file` is given.
Result<std::string> TlsFile(const StrictYaml& yaml, const YAML::Node& value,
                            const std::string& what, const FileContext* file) {
  EMBER_ASSIGN_OR_RETURN(std::string path, yaml.String(value, what, "a path"));
  if (file == nullptr) return path;
  if (path[0] != '/') {
    Result<std::string> absolute = AbsolutePath(file->dir + path, what);
    if (!absolute.ok()) return yaml.Error(value, absolute.status().message());
    path = *absolute;
  }
  Result<std::string> contents = file->env->ReadFile(path);
  if (!contents.ok()) return yaml.Error(value, what + ": " + contents.status().message());
  return path;
}

Status ParseTls(const StrictYaml& yaml, const YAML::Node& value, const FileContext* file,
                DaemonConfig* config) {
  const std::string expected =
      " must be off (plain TCP) or a map {cert: PATH, key: PATH, ca: PATH}, got ";
  if (value.IsScalar() && value.Scalar() == "off") {
    config->tls = PeerTlsMode::kOff;
    return Status::Ok();
  }
  if (!value.IsMap()) return yaml.Error(value, Key("tls") + expected + DescribeYaml(value));
  EMBER_RETURN_IF_ERROR(yaml.CheckKeys(value, Key("tls"), {"cert", "key", "ca"}));
  for (const char* required : {"cert", "key", "ca"}) {
    if (!value[required]) {
      return yaml.Error(value, Key("tls") + " needs cert, key and ca; '" +
                                   std::string(required) + "' is missing");
    }
  }
  EMBER_ASSIGN_OR_RETURN(config->tls_files.cert_path,
                         TlsFile(yaml, value["cert"], Key("tls.cert"), file));
  EMBER_ASSIGN_OR_RETURN(config->tls_files.key_path,
                         TlsFile(yaml, value["key"], Key("tls.key"), file));
  EMBER_ASSIGN_OR_RETURN(config->tls_files.ca_path,
                         TlsFile(yaml, value["ca"], Key("tls.ca"), file));
  config->tls = PeerTlsMode::kOn;
  return Status::Ok();
}

Result<UserLimits> ParseUserLimits(const StrictYaml& yaml, const YAML::Node& map) {
  UserLimits limits;
  if (!map.IsMap()) return yaml.Error(map, Key("user_limits") + " must be a map, got " + DescribeYaml(map));
  EMBER_RETURN_IF_ERROR(yaml.CheckKeys(map, Key("user_limits"),
                                       {"shm_share", "streams", "datasets", "jobs", "connections",
                                        "pending_segments", "dataset_memory"}));
  for (const auto& entry : map) {
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    const std::string name = Key("user_limits." + key);
    if (key == "shm_share") {
      EMBER_ASSIGN_OR_RETURN(std::string text, yaml.String(value, name, "a fraction such as 0.5"));
      char* end = nullptr;
      const double share = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !(share > 0 && share <= 1))
        return yaml.Error(value, name + " must be a fraction in (0, 1], got '" + text + "'");
      limits.shm_share = share;
      continue;
    }
    if (key == "dataset_memory") {
      EMBER_ASSIGN_OR_RETURN(std::string text,
                             yaml.String(value, name, "a byte count such as 4GiB or 512MiB"));
      Result<uint64_t> bytes = ParseByteSize(text);
      if (!bytes.ok()) return yaml.Error(value, name + ": " + bytes.status().message());
      limits.dataset_memory = *bytes;
      continue;
    }
    uint32_t* field = key == "streams"       ? &limits.streams
                      : key == "datasets"    ? &limits.datasets
                      : key == "jobs"        ? &limits.jobs
                      : key == "connections" ? &limits.connections
                                             : &limits.pending_segments;
    EMBER_ASSIGN_OR_RETURN(*field, yaml.Unsigned(value, name, 1, 65536));
  }
  return limits;
}

// A positive byte count ("4GiB", "512MiB", "1000") at `value`, named `name` in errors.
Result<uint64_t> PositiveBytes(const StrictYaml& yaml, const YAML::Node& value,
                               const std::string& name) {
  EMBER_ASSIGN_OR_RETURN(
      std::string text,
      yaml.String(value, name, "a byte count such as 4GiB, 512MiB, 64KiB or 1000"));
  Result<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) return yaml.Error(value, name + ": " + bytes.status().message());
  if (*bytes == 0) return yaml.Error(value, name + " must be positive, got '" + text + "'");
  return *bytes;
}

Result<DaemonConfig> ParseRoot(const StrictYaml& yaml, const YAML::Node& root,
                               const FileContext* file) {
  DaemonConfig config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    return yaml.Error(root, "expected a map of keys at the top level, got " + DescribeYaml(root));
  }
  EMBER_RETURN_IF_ERROR(yaml.CheckKeys(root, "", {"socket", "state_dir", "decode_threads",
                                                  "shm_budget", "ring_slots", "log_level",
                                                  "plugins", "listen", "tls", "node",
                                                  "reconnect_timeout", "job_fill_timeout",
                                                  "user_limits", "share_group",
                                                  "drain_timeout", "metrics_listen",
                                                  "metrics_names", "peer_threads",
                                                  "max_world_size", "trust_root_from",
                                                  "idle_exit", "cache_dir", "cache_limit",
                                                  "cache_prefetch_steps", "cache_eviction",
                                                  "share_window", "lend_decode",
                                                  "decode_workers"}));
  YAML::Node listen_node;
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
      EMBER_ASSIGN_OR_RETURN(config.shm_budget_bytes, PositiveBytes(yaml, value, Key(key)));
    } else if (key == "cache_dir") {
      EMBER_ASSIGN_OR_RETURN(config.cache_dir, yaml.String(value, Key(key), "a directory"));
    } else if (key == "cache_limit") {
      EMBER_ASSIGN_OR_RETURN(config.cache_limit_bytes, PositiveBytes(yaml, value, Key(key)));
    } else if (key == "share_window") {
      EMBER_ASSIGN_OR_RETURN(config.share_window, yaml.Unsigned(value, Key(key), 1, 64));
    } else if (key == "lend_decode") {
      EMBER_ASSIGN_OR_RETURN(const size_t lend, yaml.OneOf(value, Key(key), {"false", "true"}));
      config.lend_decode = lend == 1;
    } else if (key == "cache_prefetch_steps") {
      EMBER_ASSIGN_OR_RETURN(config.cache_prefetch_steps, yaml.Unsigned(value, Key(key), 0, 4096));
    } else if (key == "cache_eviction") {
      EMBER_ASSIGN_OR_RETURN(config.cache_eviction, yaml.String(value, Key(key), "belady or lru"));
      if (config.cache_eviction != "belady" && config.cache_eviction != "lru")
        return yaml.Error(value, Key(key) + ": '" + config.cache_eviction +
                                     "' is not one of belady, lru");
    } else if (key == "peer_threads") {
      EMBER_ASSIGN_OR_RETURN(config.peer_threads, yaml.Unsigned(value, Key(key), 0, 64));
    } else if (key == "reconnect_timeout") {
      EMBER_ASSIGN_OR_RETURN(config.reconnect_timeout_s, yaml.Unsigned(value, Key(key), 1, 3600));
    } else if (key == "job_fill_timeout") {
      EMBER_ASSIGN_OR_RETURN(config.job_fill_timeout_s, yaml.Unsigned(value, Key(key), 1, 86400));
    } else if (key == "user_limits") {
      EMBER_ASSIGN_OR_RETURN(config.user_limits, ParseUserLimits(yaml, value));
    } else if (key == "share_group") {
      EMBER_ASSIGN_OR_RETURN(config.share_group, yaml.String(value, Key(key), "a group name"));
    } else if (key == "drain_timeout") {
      EMBER_ASSIGN_OR_RETURN(config.drain_timeout_s, yaml.Unsigned(value, Key(key), 0, 300));
    } else if (key == "idle_exit") {
      EMBER_ASSIGN_OR_RETURN(config.idle_exit_s, yaml.Unsigned(value, Key(key), 0, 86400));
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
    } else if (key == "listen") {
      EMBER_ASSIGN_OR_RETURN(config.listen, yaml.String(value, Key(key), "HOST:PORT"));
      Result<HostPort> address = ParseHostPort(config.listen);
      if (!address.ok()) return yaml.Error(value, Key(key) + ": " + address.status().message());
      listen_node = value;
    } else if (key == "metrics_listen") {
      EMBER_ASSIGN_OR_RETURN(config.metrics_listen, yaml.String(value, Key(key), "HOST:PORT"));
      Result<HostPort> address = ParseHostPort(config.metrics_listen);
      if (!address.ok()) return yaml.Error(value, Key(key) + ": " + address.status().message());
    } else if (key == "max_world_size") {
      EMBER_ASSIGN_OR_RETURN(config.max_world_size,
                             yaml.Unsigned(value, Key(key), 1, uint32_t{1} << 24));
    } else if (key == "metrics_names") {
      EMBER_ASSIGN_OR_RETURN(const size_t hide, yaml.OneOf(value, Key(key), {"show", "hide"}));
      config.metrics_hide_names = hide == 1;
    } else if (key == "tls") {
      EMBER_RETURN_IF_ERROR(ParseTls(yaml, value, file, &config));
    } else if (key == "decode_workers") {
      if (!value.IsSequence())
        return yaml.Error(value, Key(key) + " must be a list of HOST:PORT, got " +
                                     DescribeYaml(value));
      for (const YAML::Node& item : value) {
        EMBER_ASSIGN_OR_RETURN(std::string address, yaml.String(item, Key(key), "a HOST:PORT"));
        Result<HostPort> parsed = ParseHostPort(address);
        if (!parsed.ok()) return yaml.Error(item, Key(key) + ": " + parsed.status().message());
        config.decode_workers.push_back(std::move(address));
      }
      if (config.decode_workers.size() > 64)
        return yaml.Error(value, Key(key) + ": at most 64 workers, got " +
                                     std::to_string(config.decode_workers.size()));
    } else if (key == "trust_root_from") {
      if (!value.IsSequence())
        return yaml.Error(value, Key(key) + " must be a list of node names, got " +
                                     DescribeYaml(value));
      for (const YAML::Node& item : value) {
        EMBER_ASSIGN_OR_RETURN(std::string node, yaml.String(item, Key(key), "a node name"));
        config.trust_root_from.push_back(std::move(node));
      }
    } else if (key == "node") {
      EMBER_ASSIGN_OR_RETURN(config.node_name, yaml.String(value, Key(key), "a node name"));
      if (config.node_name.size() > kMaxNodeNameBytes) {
        return yaml.Error(value, Key(key) + ": a node name is at most " +
                                     std::to_string(kMaxNodeNameBytes) + " bytes");
      }
    }
  }
  Status tls_ok = CheckListenHasTls(config);
  if (!tls_ok.ok()) return yaml.Error(listen_node, tls_ok.message());
  if (!config.decode_workers.empty() && config.listen.empty())
    return yaml.Error(root["decode_workers"],
                      Key("decode_workers") + " needs listen and tls: this daemon reaches "
                                              "its workers with its peer identity");
  return config;
}

Result<DaemonConfig> Parse(const std::string& yaml_text, const std::string& source,
                           const FileContext* file) {
  const StrictYaml yaml(source);
  return yaml.Parse(yaml_text,
                    [&yaml, file](const YAML::Node& root) { return ParseRoot(yaml, root, file); });
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
  return Parse(yaml_text, source, nullptr);
}

Result<DaemonConfig> LoadConfig(Env& env, const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
  const size_t slash = path.rfind('/');
  const FileContext file{&env, slash == std::string::npos ? "" : path.substr(0, slash + 1)};
  return Parse(text, path, &file);
}

Status CheckListenHasTls(const DaemonConfig& config) {
  if (config.listen.empty() || config.tls != PeerTlsMode::kUnset) return Status::Ok();
  return InvalidArgument(Key("listen") + " (" + config.listen +
                         ") needs key 'tls': add tls: {cert: PATH, key: PATH, ca: PATH} for "
                         "mutual TLS, or tls: off for plain TCP");
}

}  // namespace ember::daemon
