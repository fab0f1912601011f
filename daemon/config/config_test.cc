#include "daemon/config/config.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "common/env.h"
#include "common/temp_dir_testing.h"

namespace ember::daemon {
namespace {

// Parses `text` expecting kInvalidArgument; returns the message.
std::string ErrorOf(const std::string& text) {
  Result<DaemonConfig> result = ParseConfig(text, "test.yaml");
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(result.status().message(), Catch::StartsWith("test.yaml: "));
  return result.status().message();
}

void CheckDefaults(const DaemonConfig& c) {
  CHECK(c.socket_path == "/run/ember/emberd.sock");
  CHECK(c.state_dir == "/var/lib/ember");
  CHECK(c.decode_threads == 0);
  CHECK(c.shm_budget_bytes == (uint64_t{4} << 30));
  CHECK(c.default_slots == 8);
  CHECK(c.log_level == "info");
  CHECK(c.listen.empty());
  CHECK(c.metrics_listen.empty());
  CHECK(c.tls == PeerTlsMode::kUnset);
  CHECK(c.node_name.empty());
  CHECK(c.reconnect_timeout_s == 60);
  CHECK(c.job_fill_timeout_s == 600);
  CHECK(c.drain_timeout_s == 10);
  CHECK(c.peer_threads == 0);
  CHECK(c.cache_dir.empty());
  CHECK(c.cache_limit_bytes == (uint64_t{8} << 30));
  CHECK_FALSE(c.lend_decode);
}

TEST_CASE("the documented configs/emberd.yaml parses to the defaults and names every key") {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  REQUIRE(srcdir != nullptr);
  const std::string path = std::string(srcdir) + "/ember/configs/emberd.yaml";
  auto env = NewPosixEnv();
  Result<DaemonConfig> config = LoadConfig(*env, path);
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  CheckDefaults(*config);

  std::string text = *env->ReadFile(path);
  for (const char* key :
       {"socket", "state_dir", "decode_threads", "shm_budget", "ring_slots", "log_level",
        "plugins", "reconnect_timeout", "job_fill_timeout", "drain_timeout", "peer_threads",
        "cache_limit", "cache_prefetch_steps"}) {
    INFO(key);
    CHECK_THAT(text, Catch::Contains(std::string("\n") + key + ": "));
  }
  // Keys without a default value are shown commented out.
  for (const char* key : {"listen", "tls", "node", "metrics_listen", "cache_dir", "lend_decode"}) {
    INFO(key);
    CHECK_THAT(text, Catch::Contains(std::string("\n# ") + key + ": "));
  }
}

TEST_CASE("an empty document gives the defaults") {
  for (const char* text : {"", "\n", "# only a comment\n", "---\n"}) {
    INFO(text);
    Result<DaemonConfig> config = ParseConfig(text, "empty.yaml");
    REQUIRE(config.ok());
    CheckDefaults(*config);
  }
}

TEST_CASE("every key is read") {
  Result<DaemonConfig> config = ParseConfig(
      "socket: /tmp/e.sock\n"
      "state_dir: /srv/ember\n"
      "decode_threads: 12\n"
      "shm_budget: 512MiB\n"
      "ring_slots: 32\n"
      "log_level: debug\n"
      "reconnect_timeout: 5\n"
      "job_fill_timeout: 30\n"
      "drain_timeout: 0\n"
      "idle_exit: 300\n"
      "cache_dir: /cache/ember\n"
      "cache_limit: 100GiB\n"
      "cache_prefetch_steps: 8\n"
      "cache_eviction: lru\n"
      "peer_threads: 3\n",
      "all.yaml");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  CHECK(config->socket_path == "/tmp/e.sock");
  CHECK(config->state_dir == "/srv/ember");
  CHECK(config->decode_threads == 12);
  CHECK(config->shm_budget_bytes == (uint64_t{512} << 20));
  CHECK(config->default_slots == 32);
  CHECK(config->log_level == "debug");
  CHECK(config->reconnect_timeout_s == 5);
  CHECK_THAT(ErrorOf("reconnect_timeout: 0\n"), Catch::Contains("1..3600"));
  CHECK(config->job_fill_timeout_s == 30);
  CHECK_THAT(ErrorOf("job_fill_timeout: 0\n"), Catch::Contains("1..86400"));
  CHECK(config->drain_timeout_s == 0);
  CHECK(config->peer_threads == 3);
  CHECK_THAT(ErrorOf("peer_threads: 65\n"), Catch::Contains("0..64"));
  CHECK_THAT(ErrorOf("drain_timeout: 301\n"), Catch::Contains("0..300"));
  CHECK(config->idle_exit_s == 300);
  CHECK(ParseConfig("", "test.yaml")->idle_exit_s == 0);
  CHECK_THAT(ErrorOf("idle_exit: 86401\n"), Catch::Contains("0..86400"));
  CHECK(config->cache_dir == "/cache/ember");
  CHECK(config->cache_limit_bytes == (uint64_t{100} << 30));
  CHECK_THAT(ErrorOf("cache_limit: 0\n"), Catch::Contains("key 'cache_limit' must be positive, got '0'"));
  CHECK(config->cache_prefetch_steps == 8);
  CHECK(config->cache_eviction == "lru");
  CHECK(ParseConfig("", "test.yaml")->cache_eviction == "belady");
  CHECK(ParseConfig("", "test.yaml")->cache_prefetch_steps == 64);
  CHECK_THAT(ErrorOf("cache_prefetch_steps: 4097\n"), Catch::Contains("0..4096"));
  CHECK_THAT(ErrorOf("cache_eviction: fifo\n"), Catch::Contains("'fifo' is not one of belady, lru"));
}

TEST_CASE("keys left out keep their defaults") {
  Result<DaemonConfig> config = ParseConfig("ring_slots: 2\nshm_budget: 1000\n", "t.yaml");
  REQUIRE(config.ok());
  CHECK(config->default_slots == 2);
  CHECK(config->shm_budget_bytes == 1000);
  CHECK(config->state_dir == "/var/lib/ember");
  CHECK(config->log_level == "info");
}

TEST_CASE("an unknown key is an error naming the key and the file") {
  std::string m = ErrorOf("socket: /a\nthreads: 4\n");
  CHECK_THAT(m, Catch::Contains("unknown key 'threads'"));
  CHECK_THAT(m, Catch::Contains("decode_threads"));  // the known keys are listed
}

TEST_CASE("a wrong type or value is an error naming the key and the value") {
  CHECK(ErrorOf("decode_threads: many\n") ==
        "test.yaml: line 1, column 17: key 'decode_threads' must be a whole number in 0..1024, "
        "got 'many'");
  CHECK_THAT(ErrorOf("decode_threads: -1\n"),
             Catch::Contains("'decode_threads'") && Catch::Contains("'-1'"));
  CHECK_THAT(ErrorOf("decode_threads: 1.5\n"), Catch::Contains("'1.5'"));
  CHECK_THAT(ErrorOf("decode_threads: 5000\n"),
             Catch::Contains("0..1024") && Catch::Contains("'5000'"));
  CHECK_THAT(ErrorOf("decode_threads: [1, 2]\n"), Catch::Contains("got a list"));
  CHECK_THAT(ErrorOf("ring_slots: 1\n"), Catch::Contains("key 'ring_slots'") &&
                                             Catch::Contains("2..1024") && Catch::Contains("'1'"));
  CHECK_THAT(ErrorOf("ring_slots: 1025\n"), Catch::Contains("'1025'"));
  CHECK_THAT(ErrorOf("ring_slots: 99999999999999999999999\n"),
             Catch::Contains("'99999999999999999999999'"));
  CHECK_THAT(ErrorOf("shm_budget: 4GB\n"),
             Catch::Contains("key 'shm_budget'") && Catch::Contains("'4GB'"));
  CHECK_THAT(ErrorOf("shm_budget: 0\n"), Catch::Contains("must be positive"));
  CHECK_THAT(ErrorOf("log_level: verbose\n"),
             Catch::Contains("key 'log_level'") && Catch::Contains("'verbose'"));
  CHECK_THAT(ErrorOf("socket:\n"),
             Catch::Contains("key 'socket'") && Catch::Contains("got nothing"));
  CHECK_THAT(ErrorOf("state_dir: {a: 1}\n"),
             Catch::Contains("key 'state_dir'") && Catch::Contains("got a map"));
  CHECK_THAT(ErrorOf("socket: /" + std::string(120, 's') + "\n"),
             Catch::Contains("key 'socket'") && Catch::Contains("107 bytes"));
}

TEST_CASE("structural problems are errors") {
  CHECK_THAT(ErrorOf("- socket\n- state_dir\n"), Catch::Contains("top level"));
  CHECK_THAT(ErrorOf("ring_slots: 4\nring_slots: 5\n"),
             Catch::Contains("'ring_slots'") && Catch::Contains("more than once"));
}

TEST_CASE("YAML syntax errors report line and column") {
  std::string m = ErrorOf("socket: /a\nstate_dir: [unclosed\n");
  CHECK_THAT(m, Catch::Contains("line "));
  CHECK_THAT(m, Catch::Contains("column "));
  std::string tab = ErrorOf("socket: /a\n  log_level: info\n bad\n");
  CHECK_THAT(tab, Catch::Contains("line "));
}

TEST_CASE("ParseByteSize") {
  CHECK(*ParseByteSize("1000") == 1000);
  CHECK(*ParseByteSize("0") == 0);
  CHECK(*ParseByteSize("64KiB") == 64 * 1024);
  CHECK(*ParseByteSize("512MiB") == (uint64_t{512} << 20));
  CHECK(*ParseByteSize("4GiB") == (uint64_t{4} << 30));
  CHECK(*ParseByteSize("2TiB") == (uint64_t{2} << 40));
  CHECK(*ParseByteSize("18446744073709551615") == UINT64_MAX);
  for (const char* bad : {"", "GiB", "4 GiB", "4gib", "4GB", "-1", "+1", "1.5GiB", "0x10",
                          "18446744073709551616", "99999999TiB", "4GiBx", " 4"}) {
    INFO(bad);
    Result<uint64_t> r = ParseByteSize(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(std::string("'") + bad + "'"));
  }
}

TEST_CASE("plugins is a list of absolute paths") {
  Result<DaemonConfig> config =
      ParseConfig("plugins: [/opt/ember/libcsv.so, /opt/ember/libwav.so]\n", "emberd.yaml");
  REQUIRE(config.ok());
  CHECK(config->plugin_paths ==
        std::vector<std::string>{"/opt/ember/libcsv.so", "/opt/ember/libwav.so"});
  Result<DaemonConfig> defaults = ParseConfig("", "emberd.yaml");
  REQUIRE(defaults.ok());
  CHECK(defaults->plugin_paths.empty());

  Result<DaemonConfig> relative = ParseConfig("plugins: [libcsv.so]\n", "emberd.yaml");
  REQUIRE_FALSE(relative.ok());
  CHECK(relative.status().message() ==
        "emberd.yaml: line 1, column 11: key 'plugins' must be an absolute path, got 'libcsv.so'");
  Result<DaemonConfig> scalar = ParseConfig("plugins: /opt/ember/libcsv.so\n", "emberd.yaml");
  REQUIRE_FALSE(scalar.ok());
  CHECK_THAT(scalar.status().message(),
             Catch::Contains("key 'plugins' must be a list of absolute paths"));
}

TEST_CASE("LoadConfig names the missing file") {
  auto env = NewPosixEnv();
  const std::string path = TestTmpDir() + "/missing.yaml";
  Result<DaemonConfig> config = LoadConfig(*env, path);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == StatusCode::kNotFound);
  CHECK_THAT(config.status().message(), Catch::Contains(path));
}

TEST_CASE("LoadConfig names the file in value errors") {
  auto env = NewPosixEnv();
  const std::string path = WriteTempFile("bad.yaml", "log_level: loud\n");
  Result<DaemonConfig> config = LoadConfig(*env, path);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().message() ==
        path +
            ": line 1, column 12: key 'log_level' must be one of trace, debug, info, warn, error, "
            "off, got 'loud'");
}

TEST_CASE("listen, tls and node are read") {
  Result<DaemonConfig> config = ParseConfig(
      "listen: 10.0.0.5:7000\n"
      "tls: {cert: node.pem, key: /etc/ember/node.key, ca: ../ca.pem}\n"
      "node: gpu-07\n",
      "peers.yaml");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  CHECK(config->listen == "10.0.0.5:7000");
  CHECK(config->tls == PeerTlsMode::kOn);
  CHECK(config->tls_files.cert_path == "node.pem");  // LoadConfig resolves them
  CHECK(config->tls_files.key_path == "/etc/ember/node.key");
  CHECK(config->tls_files.ca_path == "../ca.pem");
  CHECK(config->node_name == "gpu-07");

  for (const char* listen : {"127.0.0.1:0", "[::1]:7000", "node0.cluster:65535"}) {
    INFO(listen);
    Result<DaemonConfig> off =
        ParseConfig(std::string("listen: '") + listen + "'\ntls: off\n", "off.yaml");
    INFO(off.status().ToString());
    REQUIRE(off.ok());
    CHECK(off->listen == listen);
    CHECK(off->tls == PeerTlsMode::kOff);
  }
  Result<DaemonConfig> tls_only = ParseConfig("tls: off\n", "t.yaml");
  REQUIRE(tls_only.ok());
  CHECK(tls_only->listen.empty());
}

TEST_CASE("listen without tls is an error that says what to add") {
  CHECK(ErrorOf("socket: /a\nlisten: 127.0.0.1:7000\n") ==
        "test.yaml: line 2, column 9: key 'listen' (127.0.0.1:7000) needs key 'tls': add tls: "
        "{cert: PATH, key: PATH, ca: PATH} for mutual TLS, or tls: off for plain TCP");
  DaemonConfig merged;
  merged.listen = "127.0.0.1:0";
  Status status = CheckListenHasTls(merged);
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(status.message(), Catch::StartsWith("key 'listen' (127.0.0.1:0) needs key 'tls'"));
  merged.tls = PeerTlsMode::kOff;
  CHECK(CheckListenHasTls(merged).ok());
  CHECK(CheckListenHasTls(DaemonConfig{}).ok());
}

TEST_CASE("trust_root_from is a list of node names") {
  CHECK(ParseConfig("", "t.yaml")->trust_root_from.empty());
  CHECK(ParseConfig("trust_root_from: [node0, node1]\n", "t.yaml")->trust_root_from ==
        std::vector<std::string>{"node0", "node1"});
  CHECK_THAT(ErrorOf("trust_root_from: node0\n"), Catch::Contains("must be a list of node names"));
}

TEST_CASE("decode_workers is a list of HOST:PORT and needs a peer identity") {
  const std::string tls = "listen: 10.0.0.1:7000\ntls: {cert: /c, key: /k, ca: /a}\n";
  auto config = ParseConfig(tls + "decode_workers: [10.0.0.2:7000, gpu-3:7001]\n", "w.yaml");
  REQUIRE(config.ok());
  CHECK(config->decode_workers == std::vector<std::string>{"10.0.0.2:7000", "gpu-3:7001"});
  CHECK_THAT(ErrorOf(tls + "decode_workers: 10.0.0.2:7000\n"),
             Catch::Contains("key 'decode_workers' must be a list of HOST:PORT"));
  CHECK_THAT(ErrorOf(tls + "decode_workers: [10.0.0.2]\n"), Catch::Contains("key 'decode_workers'"));
  CHECK_THAT(ErrorOf("decode_workers: [10.0.0.2:7000]\n"), Catch::Contains("needs listen and tls"));
}

TEST_CASE("share_window is a number of steps") {
  CHECK(ParseConfig("", "w.yaml")->share_window == 4);
  CHECK(ParseConfig("share_window: 16\n", "w.yaml")->share_window == 16);
  CHECK_THAT(ErrorOf("share_window: 0\n"), Catch::Contains("key 'share_window'"));
  CHECK_THAT(ErrorOf("share_window: 65\n"), Catch::Contains("key 'share_window'"));
}

TEST_CASE("lend_decode is true or false") {
  CHECK_FALSE(ParseConfig("", "l.yaml")->lend_decode);
  CHECK(ParseConfig("lend_decode: true\n", "l.yaml")->lend_decode);
  CHECK_FALSE(ParseConfig("lend_decode: false\n", "l.yaml")->lend_decode);
  CHECK_THAT(ErrorOf("lend_decode: yes\n"),
             Catch::Contains("key 'lend_decode' must be false or true, got 'yes'"));
}

TEST_CASE("max_world_size is a number of ranks") {
  CHECK(ParseConfig("", "w.yaml")->max_world_size == 65536);
  CHECK(ParseConfig("max_world_size: 1024\n", "w.yaml")->max_world_size == 1024);
  CHECK_THAT(ErrorOf("max_world_size: 0\n"), Catch::Contains("key 'max_world_size'"));
  CHECK_THAT(ErrorOf("max_world_size: 33554432\n"), Catch::Contains("key 'max_world_size'"));
}

TEST_CASE("metrics_names is show or hide") {
  Result<DaemonConfig> shown = ParseConfig("metrics_names: show\n", "m.yaml");
  REQUIRE(shown.ok());
  CHECK_FALSE(shown->metrics_hide_names);
  Result<DaemonConfig> hidden = ParseConfig("metrics_names: hide\n", "m.yaml");
  REQUIRE(hidden.ok());
  CHECK(hidden->metrics_hide_names);
  CHECK_FALSE(ParseConfig("", "m.yaml")->metrics_hide_names);
  CHECK_THAT(ErrorOf("metrics_names: omit\n"), Catch::Contains("key 'metrics_names'"));
}

TEST_CASE("metrics_listen is a HOST:PORT of its own, needing no tls") {
  for (const char* address : {"127.0.0.1:9464", "127.0.0.1:0", "[::1]:9464", "node0:9464"}) {
    INFO(address);
    Result<DaemonConfig> config =
        ParseConfig(std::string("metrics_listen: '") + address + "'\n", "m.yaml");
    REQUIRE(config.ok());
    CHECK(config->metrics_listen == address);
    CHECK(config->listen.empty());
  }
  CHECK_THAT(ErrorOf("metrics_listen: 9464\n"),
             Catch::Contains("line 1, column 17: key 'metrics_listen': expected HOST:PORT"));
  CHECK_THAT(ErrorOf("metrics_listen: 'localhost:70000'\n"), Catch::Contains("0..65535"));
  CHECK_THAT(ErrorOf("metrics_listen:\n"),
             Catch::Contains("key 'metrics_listen' must be HOST:PORT, got nothing"));
  CHECK_THAT(ErrorOf("metrics_listen: [a, b]\n"), Catch::Contains("key 'metrics_listen'"));
}

TEST_CASE("bad listen, tls and node values are errors naming the key") {
  CHECK_THAT(ErrorOf("listen: 7000\ntls: off\n"),
             Catch::Contains("line 1, column 9: key 'listen': expected HOST:PORT") &&
                 Catch::Contains("got '7000'"));
  CHECK_THAT(ErrorOf("listen: 'host:99999'\ntls: off\n"), Catch::Contains("0..65535"));
  CHECK_THAT(ErrorOf("listen:\ntls: off\n"),
             Catch::Contains("key 'listen' must be HOST:PORT, got nothing"));
  CHECK_THAT(ErrorOf("tls: on\n"),
             Catch::Contains("key 'tls' must be off (plain TCP) or a map {cert: PATH, key: PATH, "
                             "ca: PATH}, got 'on'"));
  CHECK_THAT(ErrorOf("tls: [a]\n"), Catch::Contains("key 'tls' must be off") &&
                                         Catch::Contains("got a list"));
  CHECK_THAT(ErrorOf("tls: {cert: a.pem, key: a.key}\n"),
             Catch::Contains("key 'tls' needs cert, key and ca; 'ca' is missing"));
  CHECK_THAT(ErrorOf("tls: {cert: a.pem, key: a.key, ca: c.pem, crl: x}\n"),
             Catch::Contains("unknown key 'crl'"));
  CHECK_THAT(ErrorOf("tls: {cert: a.pem, key: '', ca: c.pem}\n"),
             Catch::Contains("key 'tls.key' must be a path"));
  CHECK_THAT(ErrorOf("node:\n"), Catch::Contains("key 'node' must be a node name"));
  CHECK_THAT(ErrorOf("node: " + std::string(300, 'n') + "\n"),
             Catch::Contains("key 'node': a node name is at most 255 bytes"));
}

TEST_CASE("LoadConfig resolves tls paths against the file's directory and checks them") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("config_tls");
  WriteTestFile(dir + "/certs/node.pem", "cert");
  WriteTestFile(dir + "/certs/node.key", "key");
  WriteTestFile(dir + "/ca.pem", "ca");
  WriteTestFile(dir + "/etc/emberd.yaml",
                "listen: 127.0.0.1:0\n"
                "tls: {cert: ../certs/node.pem, key: " + dir + "/certs/node.key, ca: ../ca.pem}\n");
  Result<DaemonConfig> config = LoadConfig(*env, dir + "/etc/emberd.yaml");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  CHECK(config->tls_files.cert_path == dir + "/certs/node.pem");
  CHECK(config->tls_files.key_path == dir + "/certs/node.key");
  CHECK(config->tls_files.ca_path == dir + "/ca.pem");

  WriteTestFile(dir + "/etc/missing.yaml",
                "tls: {cert: ../certs/node.pem, key: ../certs/node.key, ca: ca.pem}\n");
  Result<DaemonConfig> missing = LoadConfig(*env, dir + "/etc/missing.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(missing.status().message(),
             Catch::StartsWith(dir + "/etc/missing.yaml: line 1, column 60: key 'tls.ca': " +
                               dir + "/etc/ca.pem: cannot open: ") &&
                 Catch::Contains("No such file"));

  WriteTestFile(dir + "/etc/dir.yaml",
                "tls: {cert: ../certs, key: ../certs/node.key, ca: ../ca.pem}\n");
  Result<DaemonConfig> directory = LoadConfig(*env, dir + "/etc/dir.yaml");
  REQUIRE_FALSE(directory.ok());
  CHECK_THAT(directory.status().message(),
             Catch::Contains("key 'tls.cert': " + dir + "/certs: "));
}

TEST_CASE("user_limits: each key read, unknown and out-of-range ones named") {
  auto config = ParseConfig(
      "user_limits: {shm_share: 0.25, streams: 3, datasets: 4, jobs: 5, connections: 6, "
      "pending_segments: 7, dataset_memory: 512MiB}\n",
      "test.yaml");
  REQUIRE(config.ok());
  CHECK(config->user_limits.shm_share == 0.25);
  CHECK(config->user_limits.streams == 3);
  CHECK(config->user_limits.datasets == 4);
  CHECK(config->user_limits.jobs == 5);
  CHECK(config->user_limits.connections == 6);
  CHECK(config->user_limits.pending_segments == 7);
  CHECK(config->user_limits.dataset_memory == uint64_t{512} << 20);
  CHECK(ParseConfig("", "test.yaml")->user_limits.shm_share == 0.5);
  CHECK(ParseConfig("", "test.yaml")->user_limits.dataset_memory == uint64_t{4} << 30);
  CHECK_THAT(ErrorOf("user_limits: {dataset_memory: lots}\n"),
             Catch::Contains("user_limits.dataset_memory"));
  CHECK_THAT(ErrorOf("user_limits: {shm_share: 1.5}\n"),
             Catch::Contains("key 'user_limits.shm_share' must be a fraction in (0, 1], got '1.5'"));
  CHECK_THAT(ErrorOf("user_limits: {streams: 0}\n"), Catch::Contains("user_limits.streams"));
  CHECK_THAT(ErrorOf("user_limits: {files: 3}\n"), Catch::Contains("files"));
  CHECK_THAT(ErrorOf("user_limits: 3\n"), Catch::Contains("must be a map"));
}
}  // namespace
}  // namespace ember::daemon
