#include "ember/launch_env.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <string>

namespace ember {
namespace {

using Vars = std::map<std::string, std::string>;

Result<LaunchEnv> Read(const Vars& vars, const std::string& default_job = "solo") {
  return ReadLaunchEnv(default_job, [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string Error(const Vars& vars) {
  Result<LaunchEnv> env = Read(vars);
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().code() == StatusCode::kInvalidArgument);
  return env.status().message();
}

const Vars kTorchrun = {{"RANK", "5"},
                        {"WORLD_SIZE", "8"},
                        {"LOCAL_RANK", "1"},
                        {"LOCAL_WORLD_SIZE", "4"},
                        {"GROUP_RANK", "1"},
                        {"GROUP_WORLD_SIZE", "2"},
                        {"MASTER_ADDR", "n0"},
                        {"MASTER_PORT", "29500"},
                        {"TORCHELASTIC_RUN_ID", "run-3"},
                        {"TORCHELASTIC_RESTART_COUNT", "2"}};

const Vars kSlurm = {{"SLURM_PROCID", "6"},
                     {"SLURM_NTASKS", "7"},
                     {"SLURM_LOCALID", "0"},
                     {"SLURM_NODEID", "3"},
                     {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                     {"SLURM_NNODES", "4"},
                     {"SLURM_JOB_ID", "4242"},
                     {"SLURM_RESTART_COUNT", "1"}};

TEST_CASE("ReadLaunchEnv without a launcher: rank 0 of 1 on one node, the default job") {
  auto alone = Read({{"EMBER_WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"SLURM_NTASKS", "3"}});
  REQUIRE(alone.ok());
  CHECK(alone->launcher == "none");
  CHECK(alone->rank == 0);
  CHECK(alone->world_size == 1);
  CHECK(alone->local_rank == 0);
  CHECK(alone->local_world_size == 1);
  CHECK(alone->node_rank == 0);
  CHECK(alone->num_nodes == 1);
  CHECK(alone->restart_count == 0);
  CHECK(alone->job == "solo");
  CHECK(alone->coordinator.empty());
  CHECK(alone->master_addr.empty());
  CHECK(Read({{"EMBER_RANK", ""}})->launcher == "none");  // empty is unset
}

TEST_CASE("ReadLaunchEnv under ember-run, one node and several") {
  auto single = Read({{"EMBER_RANK", "1"}, {"EMBER_WORLD_SIZE", "3"}, {"EMBER_JOB", "job-7"}});
  REQUIRE(single.ok());
  CHECK(single->launcher == "ember-run");
  CHECK(single->rank == 1);
  CHECK(single->world_size == 3);
  CHECK(single->local_rank == 1);        // unset: the rank
  CHECK(single->local_world_size == 3);  // unset: the world size
  CHECK(single->num_nodes == 0);         // unknown
  CHECK(single->job == "job-7");

  auto multi = Read({{"EMBER_RANK", "5"},
                     {"EMBER_WORLD_SIZE", "6"},
                     {"EMBER_LOCAL_RANK", "2"},
                     {"EMBER_LOCAL_WORLD_SIZE", "3"},
                     {"EMBER_NODE_RANK", "1"},
                     {"EMBER_NNODES", "2"},
                     {"EMBER_RESTART_COUNT", "4"},
                     {"EMBER_COORDINATOR", "node0:7070"},
                     {"EMBER_JOB", "big"}});
  REQUIRE(multi.ok());
  CHECK(multi->launcher == "ember-run");
  CHECK(multi->rank == 5);
  CHECK(multi->world_size == 6);
  CHECK(multi->local_rank == 2);
  CHECK(multi->local_world_size == 3);
  CHECK(multi->node_rank == 1);
  CHECK(multi->num_nodes == 2);
  CHECK(multi->restart_count == 4);
  CHECK(multi->coordinator == "node0:7070");
  CHECK(multi->job == "big");
}

TEST_CASE("ReadLaunchEnv under torchrun") {
  auto env = Read(kTorchrun);
  REQUIRE(env.ok());
  CHECK(env->launcher == "torchrun");
  CHECK(env->rank == 5);
  CHECK(env->world_size == 8);
  CHECK(env->local_rank == 1);
  CHECK(env->local_world_size == 4);
  CHECK(env->node_rank == 1);
  CHECK(env->num_nodes == 2);
  CHECK(env->restart_count == 2);
  CHECK(env->job == "run-3");
  CHECK(env->master_addr == "n0");
  CHECK(env->coordinator.empty());  // MASTER_ADDR is not a daemon

  Vars placeholder = kTorchrun;
  placeholder["TORCHELASTIC_RUN_ID"] = "none";  // torchrun's default --rdzv-id
  CHECK(Read(placeholder)->job == "solo");
  placeholder["SLURM_JOB_ID"] = "99";
  CHECK(Read(placeholder)->job == "99");
  placeholder["EMBER_COORDINATOR"] = "[fd00::1]:7070";
  CHECK(Read(placeholder)->coordinator == "[fd00::1]:7070");
}

TEST_CASE("ReadLaunchEnv under srun") {
  auto env = Read(kSlurm);
  REQUIRE(env.ok());
  CHECK(env->launcher == "slurm");
  CHECK(env->rank == 6);
  CHECK(env->world_size == 7);
  CHECK(env->local_rank == 0);
  CHECK(env->local_world_size == 1);  // node 3's entry of 2(x3),1
  CHECK(env->node_rank == 3);
  CHECK(env->num_nodes == 4);
  CHECK(env->restart_count == 1);
  CHECK(env->job == "4242");
  CHECK(env->master_addr.empty());

  Vars node1 = kSlurm;
  node1["SLURM_PROCID"] = "3";
  node1["SLURM_LOCALID"] = "1";
  node1["SLURM_NODEID"] = "1";
  node1["SLURM_STEP_ID"] = "0";
  auto second = Read(node1);
  REQUIRE(second.ok());
  CHECK(second->local_world_size == 2);
  CHECK(second->job == "4242.0");

  // The step's own layout comes before the allocation's.
  node1["SLURM_STEP_TASKS_PER_NODE"] = "3,4";
  node1["SLURM_STEP_NUM_NODES"] = "2";
  auto step = Read(node1);
  REQUIRE(step.ok());
  CHECK(step->local_world_size == 4);
  CHECK(step->num_nodes == 2);

  Vars plain = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}};
  auto bare = Read(plain);
  REQUIRE(bare.ok());
  CHECK(bare->local_world_size == 2);
  CHECK(bare->num_nodes == 0);
  CHECK(bare->restart_count == 0);
}

TEST_CASE("ReadLaunchEnv takes every value from the first launcher whose rank is set") {
  Vars all = kSlurm;
  all.insert(kTorchrun.begin(), kTorchrun.end());
  CHECK(Read(all)->launcher == "torchrun");  // torchrun under srun
  CHECK(Read(all)->rank == 5);
  CHECK(Read(all)->local_world_size == 4);
  CHECK(Read(all)->restart_count == 2);
  CHECK(Read(all)->job == "run-3");

  all["EMBER_RANK"] = "0";  // ember-run under srun, with torchrun's variables left over
  auto ember = Read(all);
  REQUIRE(ember.ok());
  CHECK(ember->launcher == "ember-run");
  CHECK(ember->rank == 0);
  CHECK(ember->world_size == 1);  // not WORLD_SIZE or SLURM_NTASKS
  CHECK(ember->local_rank == 0);  // not LOCAL_RANK
  CHECK(ember->local_world_size == 1);
  CHECK(ember->node_rank == 0);
  CHECK(ember->num_nodes == 0);
  CHECK(ember->restart_count == 0);
  CHECK(ember->master_addr.empty());
  CHECK(ember->job == "run-3");  // the job is not a per-launcher value
  all["EMBER_JOB"] = "mine";
  CHECK(Read(all)->job == "mine");

  // The torchrun variables are never read under Slurm alone, and WORLD_SIZE without RANK is
  // no launcher.
  Vars slurm_and_stray = kSlurm;
  slurm_and_stray["WORLD_SIZE"] = "x";
  slurm_and_stray["LOCAL_RANK"] = "9";
  CHECK(Read(slurm_and_stray)->launcher == "slurm");
  CHECK(Read(slurm_and_stray)->local_rank == 0);
}

TEST_CASE("ReadLaunchEnv names the variable and its value in each error") {
  CHECK(Error({{"EMBER_RANK", "3"}, {"EMBER_WORLD_SIZE", "3"}}) ==
        "EMBER_RANK='3' is not below EMBER_WORLD_SIZE=3");
  CHECK(Read({{"EMBER_RANK", "3"}, {"EMBER_WORLD_SIZE", "3"}}).status().ToString() ==
        "invalid_argument: EMBER_RANK='3' is not below EMBER_WORLD_SIZE=3");
  CHECK(Error({{"RANK", "1"}}) == "RANK='1' is not below WORLD_SIZE=1 (unset)");
  CHECK(Error({{"EMBER_RANK", "1x"}}) == "EMBER_RANK='1x' is not an integer >= 0");
  CHECK(Error({{"EMBER_RANK", "-1"}}) == "EMBER_RANK='-1' is not an integer >= 0");
  CHECK(Error({{"EMBER_RANK", "0"}, {"EMBER_WORLD_SIZE", "0"}}) ==
        "EMBER_WORLD_SIZE='0' is not an integer >= 1");
  CHECK(Error({{"EMBER_RANK", "0"}, {"EMBER_LOCAL_RANK", "-1"}}) ==
        "EMBER_LOCAL_RANK='-1' is not an integer >= 0");
  CHECK(Error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "0"}}) ==
        "LOCAL_WORLD_SIZE='0' is not an integer >= 1");
  CHECK(Error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}}) ==
        "LOCAL_WORLD_SIZE='3' is more than WORLD_SIZE=2");
  CHECK(
      Error({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}) ==
      "LOCAL_RANK='2' is not below LOCAL_WORLD_SIZE=2");
  CHECK(Error({{"EMBER_RANK", "3"}, {"EMBER_WORLD_SIZE", "4"}, {"EMBER_LOCAL_WORLD_SIZE", "2"}}) ==
        "EMBER_LOCAL_RANK='3' (unset: the rank) is not below EMBER_LOCAL_WORLD_SIZE=2");
  CHECK(Error({{"EMBER_RANK", "0"}, {"EMBER_NODE_RANK", "2"}, {"EMBER_NNODES", "2"}}) ==
        "EMBER_NODE_RANK='2' is not below EMBER_NNODES=2");
  CHECK(Error({{"EMBER_RANK", "0"}, {"EMBER_NNODES", "0"}}) ==
        "EMBER_NNODES='0' is not an integer >= 1");
  CHECK(Error({{"RANK", "0"}, {"TORCHELASTIC_RESTART_COUNT", "-2"}}) ==
        "TORCHELASTIC_RESTART_COUNT='-2' is not an integer >= 0");
  CHECK(Error({{"EMBER_RANK", "0"}, {"EMBER_RESTART_COUNT", "once"}}) ==
        "EMBER_RESTART_COUNT='once' is not an integer >= 0");

  Vars slurm = kSlurm;
  slurm["SLURM_NTASKS"] = "";
  CHECK(Error(slurm) == "SLURM_PROCID='6' is not below SLURM_NTASKS=1 (unset)");
  slurm = kSlurm;
  slurm["SLURM_LOCALID"] = "1";
  CHECK(Error(slurm) ==
        "SLURM_LOCALID='1' is not below SLURM_TASKS_PER_NODE=1 (node 3's entry of '2(x3),1')");
  slurm = kSlurm;
  slurm["SLURM_NNODES"] = "5";
  slurm["SLURM_NODEID"] = "4";
  CHECK(Error(slurm) ==
        "SLURM_TASKS_PER_NODE='2(x3),1' has no entry for node 4 (it lists 4 nodes)");
  for (const char* bad : {"2(x3", "2(xa),1", "2,,1", "x", "2(x0)", "0"}) {
    INFO(bad);
    slurm = kSlurm;
    slurm["SLURM_TASKS_PER_NODE"] = bad;
    CHECK(Error(slurm).find("SLURM_TASKS_PER_NODE='" + std::string(bad) +
                            "' has a malformed entry") == 0);
  }
  slurm = kSlurm;
  slurm["SLURM_TASKS_PER_NODE"] = "8";
  slurm["SLURM_NODEID"] = "0";
  CHECK(Error(slurm) ==
        "SLURM_TASKS_PER_NODE='8' (node 0's entry of '8') is more than SLURM_NTASKS=7");

  CHECK(Error({{"EMBER_COORDINATOR", "node0"}}) ==
        "EMBER_COORDINATOR='node0' is not HOST:PORT: no ':PORT'");
}

TEST_CASE("CheckHostPort: host names, IPv4 and bracketed IPv6 with a port in 1..65535") {
  for (const char* good : {"node0:7070", "10.0.0.1:1", "[::1]:65535", "a.b-c.example:443"}) {
    INFO(good);
    CHECK(CheckHostPort("--coordinator", good).ok());
  }
  CHECK(CheckHostPort("--coordinator", "n:0").message() ==
        "--coordinator='n:0' is not HOST:PORT: the port '0' is not in 1..65535");
  CHECK(CheckHostPort("X", ":7070").message() == "X=':7070' is not HOST:PORT: no host");
  CHECK(CheckHostPort("X", "::1:7070").message() ==
        "X='::1:7070' is not HOST:PORT: an IPv6 host goes in brackets, e.g. [::1]:7070");
  for (const char* bad : {"host:", "host:65536", "host:7x", "host:+80", "host: 80", "[]:80",
                          "a b:80", "a/b:80", "host:1234567"}) {
    INFO(bad);
    Status status = CheckHostPort("X", bad);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message().find("X='" + std::string(bad) + "' is not HOST:PORT: ") == 0);
  }
}

TEST_CASE("ReadLaunchEnv and EnvInt read the process's environment") {
  setenv("EMBER_RANK", "1", 1);
  setenv("EMBER_WORLD_SIZE", "2", 1);
  setenv("EMBER_JOB", "from-env", 1);
  auto env = ReadLaunchEnv("solo");
  REQUIRE(env.ok());
  CHECK(env->rank == 1);
  CHECK(env->world_size == 2);
  CHECK(env->job == "from-env");
  CHECK(*EnvInt("EMBER_WORLD_SIZE", 7, 1) == 2);
  unsetenv("EMBER_WORLD_SIZE");
  CHECK(*EnvInt("EMBER_WORLD_SIZE", 7, 1) == 7);
  setenv("EMBER_WORLD_SIZE", "two", 1);
  CHECK(EnvInt("EMBER_WORLD_SIZE", 7, 1).status().message() ==
        "EMBER_WORLD_SIZE='two' is not an integer >= 1");
  unsetenv("EMBER_RANK");
  unsetenv("EMBER_WORLD_SIZE");
  unsetenv("EMBER_JOB");
}

}  // namespace
}  // namespace ember
