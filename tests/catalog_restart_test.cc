// A registered dataset survives a daemon restart (clean stop and SIGKILL alike).
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

std::vector<std::string> Names(Client& client) {
  auto all = client.ListDatasets();
  REQUIRE(all.ok());
  std::vector<std::string> names;
  for (const auto& d : *all) names.push_back(d.spec.name + ":" + std::to_string(d.count));
  return names;
}

TEST_CASE("the catalog is intact after emberd restarts") {
  Daemon daemon;
  auto client = StartWithSyntheticSplits(daemon, 300, 50, "small");
  REQUIRE(client->AddDataset({"doomed", "idx", daemon.dir(), "test"}).ok());
  REQUIRE(client->RemoveDataset("doomed").ok());
  const std::vector<std::string> before = Names(*client);
  CHECK(before == std::vector<std::string>{"small-test:50", "small-train:300"});
  client.reset();

  daemon.Stop();
  daemon.Start();
  client = daemon.Connect();
  CHECK(Names(*client) == before);
  auto info = client->InspectDataset("small-train");
  REQUIRE(info.ok());
  REQUIRE(info->tensors.size() == 2);
  CHECK(info->tensors[0].name == "image");
  CHECK(info->tensors[0].shape == std::vector<int64_t>{28, 28});
  client.reset();

  // A daemon that dies without warning loses nothing either.
  daemon.Kill();
  daemon.Start();
  client = daemon.Connect();
  CHECK(Names(*client) == before);
  client.reset();
  daemon.Stop();
}

TEST_CASE("emberd refuses to start on a damaged catalog, naming it and the previous copy") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 100, "first");
  REQUIRE(client->AddDataset({"second", "idx", daemon.dir(), "train"}).ok());
  client.reset();
  daemon.Stop();

  const std::string file = daemon.dir() + "/state/catalog.yaml";
  std::string text = ReadFileOrEmpty(file);
  REQUIRE(text.size() > 40);
  {
    std::ofstream out(file, std::ios::trunc);
    out << text.substr(0, text.size() - 30);  // a torn write: the last lines are gone
  }
  const std::string log = daemon.dir() + "/damaged.log";
  pid_t pid = Spawn(EmberdCommand(daemon.dir()), {}, log, log);
  const int status = WaitFor(pid, std::chrono::seconds(20));
  INFO(ReadFileOrEmpty(log));
  REQUIRE(status != -1);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 2));
  CHECK_THAT(ReadFileOrEmpty(log), Catch::Contains(file + ": truncated"));
  CHECK_THAT(ReadFileOrEmpty(log), Catch::Contains("cp " + file + ".prev " + file));

  // Restored as the message says, the daemon starts with the catalog before the last change.
  {
    std::ofstream out(file, std::ios::trunc);
    out << ReadFileOrEmpty(file + ".prev");
  }
  daemon.Start();
  client = daemon.Connect();
  CHECK(Names(*client) == std::vector<std::string>{"first:100"});
  client.reset();
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
