// emberd under its service manager's signals: SIGHUP reloads the config's live keys and
// says what changed (refusing the rest by name); SIGTERM drains, flushes and exits 0 well
// within the drain deadline.
#include <signal.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Sends SIGHUP and waits until the daemon's log has one more reload line than before.
std::string HangUp(Daemon& daemon) {
  const std::string before = daemon.log();
  REQUIRE(kill(daemon.pid(), SIGHUP) == 0);
  std::string added;
  Eventually([&] {
    added = daemon.log().substr(before.size());
    return added.find("reload: ") != std::string::npos &&
           (added.find("kept the running config") != std::string::npos ||
            added.find("changed") != std::string::npos);
  });
  return added;
}

TEST_CASE("SIGHUP reloads the live keys, refuses the others by name, survives a bad file") {
  TempDir tmp;
  const std::vector<std::string> config_args =
      WriteDaemonConfig(tmp.path(), "job_fill_timeout: 600\n");
  const std::string config = config_args.at(1);
  Daemon daemon(tmp.path(), config_args);
  daemon.Start();

  // shm_budget is also a flag of the daemon's command line, which still wins.
  Write(config, "job_fill_timeout: 30\ndrain_timeout: 2\nnode: elsewhere\nshm_budget: 1GiB\n");
  std::string log = HangUp(daemon);
  INFO(daemon.log());
  CHECK_THAT(log, Catch::Contains("reload: job_fill_timeout 600 s -> 30 s, drain_timeout 10 s -> 2 s"));
  CHECK_THAT(log, Catch::Contains("reload: node: changed in " + config +
                                  " to elsewhere, needs a restart; kept (none)"));
  CHECK_THAT(log, !Catch::Contains("shm_budget"));

  Write(config, "job_fill_timeout: soon\n");
  log = HangUp(daemon);
  CHECK_THAT(log, Catch::Contains("reload: " + config + ": line 1"));
  CHECK_THAT(log, Catch::Contains("job_fill_timeout"));
  CHECK_THAT(log, Catch::Contains("kept the running config"));
  // Still serving, with the reloaded settings.
  auto client = daemon.Connect();
  CHECK(client->ListDatasets().ok());
  client.reset();

  Write(config, "job_fill_timeout: 30\ndrain_timeout: 2\nnode: elsewhere\n");
  CHECK_THAT(HangUp(daemon), Catch::Contains("reload: nothing changed"));
  daemon.Stop();
  CHECK_THAT(daemon.log(), Catch::Contains("draining for up to 2 s"));
}

TEST_CASE("SIGTERM during streams drains, flushes the journal and exits 0 in time") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 2000);
  std::vector<std::unique_ptr<StreamReader>> readers;
  for (int i = 0; i < 2; ++i) {
    auto reader = client->OpenStream(ReaderOptions("job" + std::to_string(i), 16, 0));
    REQUIRE(reader.ok());
    for (int b = 0; b < 3; ++b) {
      auto batch = (*reader)->Next();
      REQUIRE(batch.ok());
      REQUIRE(batch->has_value());
    }
    readers.push_back(std::move(reader).value());
  }
  const auto start = std::chrono::steady_clock::now();
  daemon.Stop();  // SIGTERM; fails unless it exits 0
  const auto took = std::chrono::steady_clock::now() - start;
  INFO(daemon.log());
  CHECK(took < std::chrono::seconds(5));
  CHECK_THAT(daemon.log(), Catch::Contains("shutting down: no new connections or streams"));
  CHECK_THAT(daemon.log(), Catch::Contains("drained: no batch in flight"));
  CHECK_THAT(daemon.log(), Catch::Contains("emberd stopped"));
  // The readers learn that their streams ended; none hangs.
  for (auto& reader : readers) {
    auto next = reader->Next();
    for (int i = 0; i < 16 && next.ok() && next->has_value(); ++i) next = reader->Next();
    CHECK_FALSE((next.ok() && next->has_value()));
  }
}

}  // namespace
}  // namespace ember::testing
