#include "tools/ember_run/rank_env.h"

#include "ember/launch_env.h"

namespace ember::tools {

Status CheckRunLayout(const RunLayout& layout) {
  if (layout.nnodes < 1)
    return InvalidArgument("--nnodes " + std::to_string(layout.nnodes) + " is below 1");
  if (layout.nproc < 1)
    return InvalidArgument("--nproc " + std::to_string(layout.nproc) + " is below 1");
  if (layout.node_rank < 0 || layout.node_rank >= layout.nnodes) {
    return InvalidArgument("--node-rank " + std::to_string(layout.node_rank) + " is not in 0.." +
                           std::to_string(layout.nnodes - 1) + " (--nnodes " +
                           std::to_string(layout.nnodes) + ")");
  }
  if (!layout.coordinator.empty())
    EMBER_RETURN_IF_ERROR(CheckHostPort("--coordinator", layout.coordinator));
  if (layout.nnodes > 1 && layout.job.empty()) {
    return InvalidArgument("--job is required with --nnodes " + std::to_string(layout.nnodes) +
                           ": the ember-run of every node must give its ranks the same job");
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, std::string>> RankEnvironment(const RunLayout& layout,
                                                                 int local_rank,
                                                                 int restart_count) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"EMBER_RANK", std::to_string(layout.node_rank * layout.nproc + local_rank)},
      {"EMBER_WORLD_SIZE", std::to_string(layout.nnodes * layout.nproc)},
      {"EMBER_LOCAL_RANK", std::to_string(local_rank)},
      {"EMBER_LOCAL_WORLD_SIZE", std::to_string(layout.nproc)},
      {"EMBER_NODE_RANK", std::to_string(layout.node_rank)},
      {"EMBER_NNODES", std::to_string(layout.nnodes)},
      {"EMBER_RESTART_COUNT", std::to_string(restart_count)},
      {"EMBER_JOB", layout.job},
  };
  if (!layout.socket.empty()) env.emplace_back("EMBER_SOCKET", layout.socket);
  if (!layout.coordinator.empty()) env.emplace_back("EMBER_COORDINATOR", layout.coordinator);
  return env;
}

}  // namespace ember::tools
