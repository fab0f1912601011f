// A registered dataset survives a daemon restart (clean stop and SIGKILL alike).
#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace ember::testing
