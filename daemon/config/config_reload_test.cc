#include "daemon/config/config_reload.h"

#include <catch2/catch.hpp>

#include "daemon/config/config.h"

namespace ember::daemon {
namespace {

DaemonConfig Parsed(const std::string& yaml) {
  auto config = ParseConfig(yaml, "emberd.yaml");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

TEST_CASE("ByteSizeText uses the largest unit that divides exactly") {
  CHECK(ByteSizeText(0) == "0 bytes");
  CHECK(ByteSizeText(1000) == "1000 bytes");
  CHECK(ByteSizeText(1024) == "1 KiB");
  CHECK(ByteSizeText(1536ull << 20) == "1536 MiB");
  CHECK(ByteSizeText(4ull << 30) == "4 GiB");
  CHECK(ByteSizeText(3ull << 40) == "3 TiB");
  CHECK(ByteSizeText(1ull << 50) == "1024 TiB");
}

TEST_CASE("the same config changes nothing") {
  const DaemonConfig running = Parsed("log_level: info\n");
  ConfigReload reload = DiffConfigs(running, running, "emberd.yaml");
  CHECK(reload.changes.empty());
  CHECK(reload.refused.empty());
  CHECK(DescribeChanges(reload) == "reload: nothing changed");
}

TEST_CASE("live keys are taken and described") {
  const DaemonConfig running = Parsed("log_level: info\nshm_budget: 1GiB\n");
  const DaemonConfig loaded = Parsed(
      "log_level: debug\nshm_budget: 2GiB\nring_slots: 16\njob_fill_timeout: 30\n"
      "drain_timeout: 3\n");
  ConfigReload reload = DiffConfigs(running, loaded, "/etc/ember/emberd.yaml");
  CHECK(reload.refused.empty());
  CHECK(DescribeChanges(reload) ==
        "reload: log_level info -> debug, shm_budget 1 GiB -> 2 GiB, ring_slots 8 -> 16, "
        "job_fill_timeout 600 s -> 30 s, drain_timeout 10 s -> 3 s");
  CHECK(reload.config.log_level == "debug");
  CHECK(reload.config.shm_budget_bytes == 2ull << 30);
  CHECK(reload.config.default_slots == 16);
  CHECK(reload.config.job_fill_timeout_s == 30);
  CHECK(reload.config.drain_timeout_s == 3);
}

TEST_CASE("keys that need a restart are refused, naming the key and the file, and kept") {
  const DaemonConfig running =
      Parsed("socket: /run/ember/emberd.sock\nstate_dir: /var/lib/ember\nlog_level: info\n");
  const DaemonConfig loaded = Parsed(
      "socket: /tmp/other.sock\nstate_dir: /srv/ember\ndecode_threads: 3\n"
      "plugins: [/usr/lib/x.so]\nlisten: 127.0.0.1:7000\ntls: off\nnode: n2\n"
      "reconnect_timeout: 5\nlog_level: warn\n");
  ConfigReload reload = DiffConfigs(running, loaded, "/etc/ember/emberd.yaml");
  CHECK(reload.changes == std::vector<std::string>{"log_level info -> warn"});
  CHECK(reload.refused ==
        std::vector<std::string>{
            "socket: changed in /etc/ember/emberd.yaml to /tmp/other.sock, needs a restart; "
            "kept /run/ember/emberd.sock",
            "state_dir: changed in /etc/ember/emberd.yaml to /srv/ember, needs a restart; "
            "kept /var/lib/ember",
            "decode_threads: changed in /etc/ember/emberd.yaml to 3, needs a restart; kept 0",
            "plugins: changed in /etc/ember/emberd.yaml to [/usr/lib/x.so], needs a restart; "
            "kept []",
            "listen: changed in /etc/ember/emberd.yaml to 127.0.0.1:7000, needs a restart; "
            "kept (none)",
            "tls: changed in /etc/ember/emberd.yaml to off, needs a restart; kept (unset)",
            "node: changed in /etc/ember/emberd.yaml to n2, needs a restart; kept (none)",
            "reconnect_timeout: changed in /etc/ember/emberd.yaml to 5 s, needs a restart; "
            "kept 60 s",
        });
  // Only the live key moved.
  CHECK(reload.config.log_level == "warn");
  CHECK(reload.config.socket_path == running.socket_path);
  CHECK(reload.config.state_dir == running.state_dir);
  CHECK(reload.config.decode_threads == running.decode_threads);
  CHECK(reload.config.plugin_paths.empty());
  CHECK(reload.config.listen.empty());
  CHECK(reload.config.tls == PeerTlsMode::kUnset);
  CHECK(reload.config.node_name.empty());
  CHECK(reload.config.reconnect_timeout_s == 60);
}

TEST_CASE("lend_decode needs a restart") {
  const DaemonConfig running = Parsed("");
  ConfigReload reload = DiffConfigs(running, Parsed("lend_decode: true\n"), "/etc/e.yaml");
  CHECK(reload.refused == std::vector<std::string>{
                              "lend_decode: changed in /etc/e.yaml to true, needs a restart; "
                              "kept false"});
  CHECK_FALSE(reload.config.lend_decode);
}

}  // namespace
}  // namespace ember::daemon
