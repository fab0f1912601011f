#include "tools/ember_run/rank_env.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "ember/launch_env.h"

namespace ember::tools {
namespace {

// What a rank started with `layout` reads back through ReadLaunchEnv.
LaunchEnv ReadBack(const RunLayout& layout, int local_rank, int restart_count) {
  std::map<std::string, std::string> vars;
  for (const auto& [name, value] : RankEnvironment(layout, local_rank, restart_count))
    vars.emplace(name, value);
  Result<LaunchEnv> env = ReadLaunchEnv("unused", [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  REQUIRE(env.ok());
  return *env;
}

Status Check(RunLayout layout) { return CheckRunLayout(&layout); }

TEST_CASE("RankEnvironment: node K's local rank i is global rank K*M+i of N*M") {
  RunLayout layout{.nnodes = 3,
                   .node_rank = 0,
                   .nproc = 2,
                   .job = "j",
                   .socket = "/s.sock",
                   .coordinator = "n0:7070"};
  int expected_rank = 0;
  for (int node = 0; node < 3; ++node) {
    layout.node_rank = node;
    for (int local = 0; local < 2; ++local, ++expected_rank) {
      INFO("node " << node << " local rank " << local);
      const LaunchEnv env = ReadBack(layout, local, 4);
      CHECK(env.launcher == "ember-run");
      CHECK(env.rank == expected_rank);
      CHECK(env.world_size == 6);
      CHECK(env.local_rank == local);
      CHECK(env.local_world_size == 2);
      CHECK(env.node_rank == node);
      CHECK(env.num_nodes == 3);
      CHECK(env.restart_count == 4);
      CHECK(env.job == "j");
      CHECK(env.coordinator == "n0:7070");
    }
  }
  auto vars = RankEnvironment(layout, 1, 0);
  CHECK(std::count(vars.begin(), vars.end(),
                   std::make_pair(std::string("EMBER_SOCKET"), std::string("/s.sock"))) == 1);
}

TEST_CASE("RankEnvironment sets EMBER_SOCKET and EMBER_COORDINATOR only when given") {
  const RunLayout single{.nproc = 2, .job = "j"};
  CHECK(single.nnodes == 1);
  for (const auto& [name, value] : RankEnvironment(single, 1, 0)) {
    CHECK(name != "EMBER_SOCKET");
    CHECK(name != "EMBER_COORDINATOR");
  }
  const LaunchEnv env = ReadBack(single, 1, 0);
  CHECK(env.rank == 1);
  CHECK(env.world_size == 2);
  CHECK(env.num_nodes == 1);
  CHECK(env.restart_count == 0);
}

TEST_CASE("CheckRunLayout names the flag and its value") {
  CHECK(Check({.nproc = 1}).ok());
  CHECK(Check({.nnodes = 2, .node_rank = 1, .nproc = 4, .job = "j", .coordinator = "h:1"})
            .ok());
  CHECK(Check({.nnodes = 2, .node_rank = 2, .nproc = 1, .job = "j"}).message() ==
        "--node-rank 2 is not in 0..1 (--nnodes 2)");
  CHECK(Check({.nnodes = 2, .node_rank = -1, .nproc = 1, .job = "j"}).message() ==
        "--node-rank -1 is not in 0..1 (--nnodes 2)");
  CHECK(Check({.nnodes = 0}).message() == "--nnodes 0 is below 1");
  CHECK(Check({.nproc = 0}).message() == "--nproc 0 is not in 1..1024");
  CHECK(Check({.nnodes = 2, .node_rank = 0, .nproc = 1}).message() ==
        "--job is required with --nnodes 2: the ember-run of every node must give its ranks the "
        "same job");
  const Status bad = Check({.nproc = 1, .coordinator = "n0"});
  CHECK(bad.code() == StatusCode::kInvalidArgument);
  CHECK(bad.message() == "--coordinator='n0' is not HOST:PORT: no ':PORT'");
}

TEST_CASE("--nproc with a count per node: uneven layouts, ranks numbered node after node") {
  RunLayout layout{.nnodes = 3, .node_rank = 2, .job = "j", .coordinator = "h:1"};
  REQUIRE(ParseNproc("2,4,3", &layout).ok());
  REQUIRE(CheckRunLayout(&layout).ok());
  CHECK(layout.nproc == 3);  // this node's
  CHECK(FirstRank(layout) == 6);
  CHECK(WorldSize(layout) == 9);
  const LaunchEnv env = ReadBack(layout, 1, 0);
  CHECK(env.rank == 7);
  CHECK(env.world_size == 9);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 3);
  // One count: every node's.
  RunLayout uniform{.nnodes = 2, .node_rank = 1, .job = "j"};
  REQUIRE(ParseNproc("4", &uniform).ok());
  REQUIRE(CheckRunLayout(&uniform).ok());
  CHECK(FirstRank(uniform) == 4);
  CHECK(WorldSize(uniform) == 8);
  // Errors name the value.
  RunLayout bad{.nnodes = 3, .node_rank = 0, .job = "j"};
  CHECK(ParseNproc("2,x", &bad).message() ==
        "--nproc '2,x' is not a count (M) or a count per node (M0,M1,...)");
  CHECK(ParseNproc("", &bad).code() == StatusCode::kInvalidArgument);
  REQUIRE(ParseNproc("2,4", &bad).ok());
  CHECK(CheckRunLayout(&bad).message() == "--nproc gives 2 counts, one per node, for --nnodes 3");
  REQUIRE(ParseNproc("2,0,1", &bad).ok());
  CHECK(CheckRunLayout(&bad).message() == "--nproc 0 is not in 1..1024");
}

}  // namespace
}  // namespace ember::tools
