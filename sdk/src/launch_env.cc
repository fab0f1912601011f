#include "ember/launch_env.h"

#include <cstdlib>
#include <exception>
#include <vector>

namespace ember {
namespace {

// The variables one launcher sets; nullptr where it has none. Where a list names several,
// the first that is set wins.
struct Launcher {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  std::vector<const char*> local_world_size;
  bool per_node_lists;  // local_world_size holds Slurm's "2(x3),1" lists, one entry per node
  const char* node_rank;
  std::vector<const char*> num_nodes;
  const char* restart_count;
  const char* master_addr;
};

const std::vector<Launcher>& Launchers() {
  static const std::vector<Launcher> launchers = {
      {"ember-run",
       "EMBER_RANK",
       "EMBER_WORLD_SIZE",
       "EMBER_LOCAL_RANK",
       {"EMBER_LOCAL_WORLD_SIZE"},
       false,
       "EMBER_NODE_RANK",
       {"EMBER_NNODES"},
       "EMBER_RESTART_COUNT",
       nullptr},
      {"torchrun",
       "RANK",
       "WORLD_SIZE",
       "LOCAL_RANK",
       {"LOCAL_WORLD_SIZE"},
       false,
       "GROUP_RANK",
       {"GROUP_WORLD_SIZE"},
       "TORCHELASTIC_RESTART_COUNT",
       "MASTER_ADDR"},
      {"slurm",
       "SLURM_PROCID",
       "SLURM_NTASKS",
       "SLURM_LOCALID",
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"},
       true,
       "SLURM_NODEID",
       {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"},
       "SLURM_RESTART_COUNT",
       nullptr},
  };
  return launchers;
}

// A value and where it came from, for error messages: "NAME='text'".
struct Sourced {
  int value = 0;
  std::string source;  // the variable
  std::string note{};  // how the value was found where it is not the variable's, e.g. " (unset)"
};

std::string Describe(const Sourced& v) { return v.source + "=" + std::to_string(v.value) + v.note; }

// The variable's value, "" when it is unset or empty.
std::string Get(const EnvLookup& lookup, const char* name) {
  if (name == nullptr) return "";
  const char* value = lookup(name);
  return value != nullptr ? std::string(value) : std::string();
}

// The first of `names` that is set, nullptr if none is.
const char* FirstSet(const EnvLookup& lookup, const std::vector<const char*>& names) {
  for (const char* name : names)
    if (!Get(lookup, name).empty()) return name;
  return nullptr;
}

Status NotAnInteger(const std::string& name, const std::string& text, int min) {
  return InvalidArgument(name + "='" + text + "' is not an integer >= " + std::to_string(min));
}

// `text` as an int >= min, or the error naming `name`.
Result<int> ParseInt(const std::string& name, const std::string& text, int min) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || value < min) return NotAnInteger(name, text, min);
  return value;
}

Result<int> LookupInt(const EnvLookup& lookup, const char* name, int fallback, int min) {
  const std::string text = Get(lookup, name);
  if (text.empty()) return fallback;
  return ParseInt(name, text, min);
}

// Variable `name` as a Sourced int, or `fallback` when unset.
Result<Sourced> LookupSourced(const EnvLookup& lookup, const char* name, const Sourced& fallback,
                              int min) {
  if (name == nullptr || Get(lookup, name).empty()) return fallback;
  EMBER_ASSIGN_OR_RETURN(int value, LookupInt(lookup, name, 0, min));
  return Sourced{value, name};
}

// Entry `node` of a Slurm tasks-per-node list such as "2(x3),1" (nodes 0-2 run 2 tasks,
// node 3 runs 1).
Result<int> TasksOnNode(const std::string& name, const std::string& list, int node) {
  const std::string bad = name + "='" + list + "' ";
  size_t start = 0;
  int first_node = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string entry = list.substr(start, end - start);
    std::string count = entry, repeat = "1";
    const size_t open = entry.find("(x");
    if (open != std::string::npos) {
      if (entry.back() != ')')
        return InvalidArgument(bad + "has a malformed entry '" + entry + "'");
      count = entry.substr(0, open);
      repeat = entry.substr(open + 2, entry.size() - open - 3);
    }
    Result<int> tasks = ParseInt(name, count, 1);
    Result<int> times = ParseInt(name, repeat, 1);
    if (!tasks.ok() || !times.ok())
      return InvalidArgument(bad + "has a malformed entry '" + entry + "'");
    if (node < first_node + *times) return *tasks;
    first_node += *times;
    start = end + 1;
  }
  return InvalidArgument(bad + "has no entry for node " + std::to_string(node) + " (it lists " +
                         std::to_string(first_node) + " nodes)");
}

Status CheckBelow(const Sourced& index, const Sourced& count) {
  if (index.value < count.value) return Status::Ok();
  return InvalidArgument(index.source + "='" + std::to_string(index.value) + "'" + index.note +
                         " is not below " + Describe(count));
}

Result<LaunchEnv> ReadFrom(const Launcher& l, const EnvLookup& lookup) {
  LaunchEnv env;
  env.launcher = l.name;
  EMBER_ASSIGN_OR_RETURN(Sourced rank, LookupSourced(lookup, l.rank, {0, l.rank, ""}, 0));
  EMBER_ASSIGN_OR_RETURN(Sourced world,
                         LookupSourced(lookup, l.world_size, {1, l.world_size, " (unset)"}, 1));
  EMBER_RETURN_IF_ERROR(CheckBelow(rank, world));
  EMBER_ASSIGN_OR_RETURN(Sourced node, LookupSourced(lookup, l.node_rank, {0, l.node_rank, ""}, 0));
  const char* nodes_name = FirstSet(lookup, l.num_nodes);
  EMBER_ASSIGN_OR_RETURN(Sourced nodes, LookupSourced(lookup, nodes_name, {0, "", ""}, 1));
  if (nodes.value > 0) EMBER_RETURN_IF_ERROR(CheckBelow(node, nodes));

  const char* local_world_name = FirstSet(lookup, l.local_world_size);
  Sourced local_world{world.value, l.local_world_size.front(), " (unset: the world size)"};
  if (local_world_name != nullptr && l.per_node_lists) {
    const std::string list = Get(lookup, local_world_name);
    EMBER_ASSIGN_OR_RETURN(local_world.value, TasksOnNode(local_world_name, list, node.value));
    local_world.source = local_world_name;
    local_world.note = " (node " + std::to_string(node.value) + "'s entry of '" + list + "')";
  } else {
    EMBER_ASSIGN_OR_RETURN(local_world, LookupSourced(lookup, local_world_name, local_world, 1));
  }
  if (local_world.value > world.value) {
    return InvalidArgument(local_world.source + "='" + std::to_string(local_world.value) + "'" +
                           local_world.note + " is more than " + Describe(world));
  }
  EMBER_ASSIGN_OR_RETURN(
      Sourced local,
      LookupSourced(lookup, l.local_rank, {rank.value, l.local_rank, " (unset: the rank)"}, 0));
  EMBER_RETURN_IF_ERROR(CheckBelow(local, local_world));
  EMBER_ASSIGN_OR_RETURN(env.restart_count, LookupInt(lookup, l.restart_count, 0, 0));

  env.rank = rank.value;
  env.world_size = world.value;
  env.local_rank = local.value;
  env.local_world_size = local_world.value;
  env.node_rank = node.value;
  env.num_nodes = nodes.value;
  env.master_addr = Get(lookup, l.master_addr);
  return env;
}

std::string JobName(const EnvLookup& lookup, const std::string& default_job) {
  if (std::string job = Get(lookup, "EMBER_JOB"); !job.empty()) return job;
  if (std::string run = Get(lookup, "TORCHELASTIC_RUN_ID"); !run.empty() && run != "none")
    return run;
  if (std::string slurm = Get(lookup, "SLURM_JOB_ID"); !slurm.empty()) {
    const std::string step = Get(lookup, "SLURM_STEP_ID");
    return step.empty() ? slurm : slurm + "." + step;
  }
  return default_job;
}

}  // namespace

Result<int> EnvInt(const char* name, int fallback, int min) {
  return LookupInt([](const char* n) { return std::getenv(n); }, name, fallback, min);
}

Status CheckHostPort(const std::string& name, const std::string& value) {
  const std::string bad = name + "='" + value + "' is not HOST:PORT: ";
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos) return InvalidArgument(bad + "no ':PORT'");
  const std::string host = value.substr(0, colon), port = value.substr(colon + 1);
  if (host.empty() || host == "[]") return InvalidArgument(bad + "no host");
  const bool bracketed = host.front() == '[' && host.back() == ']';
  if (!bracketed && host.find_first_of(":[]") != std::string::npos)
    return InvalidArgument(bad + "an IPv6 host goes in brackets, e.g. [::1]:7070");
  if (host.find_first_of(" \t/") != std::string::npos)
    return InvalidArgument(bad + "the host has a space or '/'");
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
      std::stoi(port) > 65535)
    return InvalidArgument(bad + "the port '" + port + "' is not in 1..65535");
  return Status::Ok();
}

Result<LaunchEnv> ReadLaunchEnv(const std::string& default_job, const EnvLookup& lookup) {
  LaunchEnv env;
  env.launcher = "none";
  for (const Launcher& launcher : Launchers()) {
    if (!Get(lookup, launcher.rank).empty()) {
      EMBER_ASSIGN_OR_RETURN(env, ReadFrom(launcher, lookup));
      break;
    }
  }
  env.job = JobName(lookup, default_job);
  env.coordinator = Get(lookup, "EMBER_COORDINATOR");
  if (!env.coordinator.empty())
    EMBER_RETURN_IF_ERROR(CheckHostPort("EMBER_COORDINATOR", env.coordinator));
  return env;
}

Result<LaunchEnv> ReadLaunchEnv(const std::string& default_job) {
  return ReadLaunchEnv(default_job, [](const char* name) { return std::getenv(name); });
}

}  // namespace ember
