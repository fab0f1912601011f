// emberd's configuration file (YAML). configs/emberd.yaml documents every key.
// Unknown keys and bad values are rejected with the key's name and the file.
#ifndef EMBER_DAEMON_CONFIG_CONFIG_H_
#define EMBER_DAEMON_CONFIG_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/env.h"
#include "daemon/access/user_limits.h"
#include "ember/status.h"

namespace ember::daemon {

// Key `tls`: how the TCP endpoint for other daemons (key `listen`) and connections to them
// are secured. kUnset: the key is absent (an error when `listen` is set).
enum class PeerTlsMode { kUnset, kOff, kOn };

// Key `tls: {cert: PATH, key: PATH, ca: PATH}`: PEM files of this node's certificate (a
// chain may follow it), its private key and the one CA whose certificates peers must have.
struct PeerTlsFiles {
  std::string cert_path;
  std::string key_path;
  std::string ca_path;
};

struct DaemonConfig {
  std::string socket_path = "/run/ember/emberd.sock";  // key: socket
  std::string state_dir = "/var/lib/ember";            // key: state_dir
  uint32_t decode_threads = 0;            // key: decode_threads; 0 = one per core
  uint64_t shm_budget_bytes = 4ull << 30; // key: shm_budget; integer bytes or "512MiB", "4GiB"
  // key: cache_dir; where shards read from http(s):// URLs are kept (empty: <state_dir>/
  // shard-cache); key: cache_limit, the most bytes kept there (a byte count).
  std::string cache_dir;
  uint64_t cache_limit_bytes = 8ull << 30;
  // key: cache_prefetch_steps; how many batches ahead of each stream its remote shards are
  // fetched (0..4096). key: cache_eviction; "belady" (the entry whose next use is
  // farthest; the default) or "lru" (least recently used: only to measure against).
  uint32_t cache_prefetch_steps = 64;
  // key: share_window; how many steps (1..64) of the job that starts a share group its
  // rows are held for: a member further behind the group decodes its own batches.
  uint32_t share_window = 4;
  // key: lend_decode; true: other nodes' streams may have this daemon decode samples of
  // its datasets for them (decode rows streams, with `listen`: remote decode workers) on its
  // decode threads. false (the default): refused.
  bool lend_decode = false;
  // key: decode_workers; HOST:PORT of other daemons (their listen endpoints, with
  // lend_decode on) that decode parts of this daemon's streams' batches (at most 64).
  std::vector<std::string> decode_workers;
  std::string cache_eviction = "belady";
  uint32_t default_slots = 8;             // key: ring_slots; 2..1024
  std::string log_level = "info";         // key: log_level; trace|debug|info|warn|error|off
  // key: plugins; absolute paths of dataset-format plugin libraries (ember/plugin.h),
  // the only ones emberd loads.
  std::vector<std::string> plugin_paths;
  // key: listen; HOST:PORT (daemon/peer/host_port.h) of the TCP endpoint for other
  // daemons, port 0 for any free one; empty: no TCP endpoint. Requires key tls.
  std::string listen;
  PeerTlsMode tls = PeerTlsMode::kUnset;  // key: tls; off or {cert, key, ca}
  PeerTlsFiles tls_files;                 // when tls is kOn
  std::string node_name;                  // key: node; empty: the host's name
  // key: peer_threads; event-loop threads (1..64) serving other daemons' connections
  // (with `listen`); 0: one per core, at most 4.
  uint32_t peer_threads = 0;
  // key: metrics_listen; HOST:PORT of the HTTP endpoint serving Prometheus metrics at
  // /metrics (daemon/metrics/metrics_server.h), port 0 for any free one; empty: none.
  std::string metrics_listen;
  // key: metrics_names; show (default) or hide: the metrics name jobs and datasets by a
  // keyed hash instead (for hosts where the endpoint cannot be bound privately).
  bool metrics_hide_names = false;
  // key: reconnect_timeout; seconds (1..3600) a rank's stream keeps trying to reach its
  // job's coordinating daemon (another node's) again before it fails.
  uint32_t reconnect_timeout_s = 60;
  // key: job_fill_timeout; seconds (1..86400) a job may wait for every rank of its world
  // to join (after it is created, or replayed at startup) before it expires.
  uint32_t job_fill_timeout_s = 600;
  // key: trust_root_from; the nodes whose daemons may speak for root here: a caller they
  // report as privileged (root, or their emberd's uid) is privileged here too. From any
  // other node it is its uid without the privilege (so a node's certificate cannot act
  // as root over every user's jobs). Empty: none.
  std::vector<std::string> trust_root_from;
  // key: max_world_size; the most ranks (1..16777216) a job, a stream's world or a
  // shared-memory segment may have: what a world costs (its ranks' state, status) grows
  // with it. The default is kDefaultMaxWorldSize (daemon/coordinator/job_name.h).
  uint32_t max_world_size = 65536;
  // key: user_limits; a map of what one uid may hold: shm_share (the fraction 0 < f <= 1
  // of shm_budget for its rings), streams, datasets, jobs, connections,
  // pending_segments (each 1..65536), dataset_memory (bytes of its datasets loaded in
  // emberd's memory, idx sets: a byte count, default 4GiB).
  UserLimits user_limits;
  // key: share_group; a group name: its members reach each other's datasets and jobs
  // (daemon/access/principal.h). Empty: every user reaches only its own.
  std::string share_group;
  // key: drain_timeout; seconds (0..300) emberd waits at SIGTERM for the batches being
  // written to finish before it closes its streams (keep it below TimeoutStopSec=).
  uint32_t drain_timeout_s = 10;
  // key: idle_exit; seconds (0..86400) after which emberd stops by itself once it has had
  // no client connection for that long (a user's private daemon, started on demand by
  // the SDK). 0: never (a system service).
  uint32_t idle_exit_s = 0;
};

// Parses YAML text; `source` names it in errors, with the place (common/strict_yaml.h):
//   "emberd.yaml: line 3, column 17: key 'decode_threads' must be a whole number in
//    0..1024, got 'many'"
// An empty document gives the defaults. kInvalidArgument on any unknown or repeated key,
// wrong type or out-of-range value, and for `listen` without `tls` (CheckListenHasTls).
// The tls files' paths are kept as written: LoadConfig resolves and checks them.
Result<DaemonConfig> ParseConfig(const std::string& yaml_text, const std::string& source);

// Reads `path` through env and parses it. Relative tls file paths are resolved against
// the directory of `path`; each tls file must be readable, else kInvalidArgument naming
// the key and the path ("emberd.yaml: line 5, column 9: key 'tls.ca': /etc/ember/ca.pem:
// cannot open: No such file or directory").
Result<DaemonConfig> LoadConfig(Env& env, const std::string& path);

// kInvalidArgument when `listen` is set and `tls` is not: "key 'listen' (HOST:PORT) needs
// key 'tls': add tls: {cert: PATH, key: PATH, ca: PATH} for mutual TLS, or tls: off for
// plain TCP". For settings merged from flags (emberd --listen) after the file was read.
Status CheckListenHasTls(const DaemonConfig& config);

// "4GiB" / "512MiB" / "64KiB" / "1000" -> bytes; kInvalidArgument otherwise.
Result<uint64_t> ParseByteSize(const std::string& text);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CONFIG_CONFIG_H_
