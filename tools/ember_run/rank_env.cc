#include "tools/ember_run/rank_env.h"

#include <charconv>
#include <numeric>

#include "ember/launch_env.h"

namespace ember::tools {

Status ParseNproc(const std::string& text, RunLayout* layout) {
  std::vector<int> counts;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(text.find(',', begin), text.size());
    int count = 0;
    auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end, count);
    if (begin == end || ec != std::errc() || ptr != text.data() + end)
      return InvalidArgument("--nproc '" + text +
                             "' is not a count (M) or a count per node (M0,M1,...)");
    counts.push_back(count);
    if (end == text.size()) break;
    begin = end + 1;
  }
  layout->nproc = counts.front();
  layout->nproc_per_node = counts.size() > 1 ? counts : std::vector<int>{};
  return Status::Ok();
}

Status CheckRunLayout(RunLayout* layout_in) {
  RunLayout& layout = *layout_in;
  if (layout.nnodes < 1)
    return InvalidArgument("--nnodes " + std::to_string(layout.nnodes) + " is below 1");
  std::vector<int> counts = layout.nproc_per_node;
  if (counts.empty()) counts.push_back(layout.nproc);
  for (int count : counts) {
    if (count < 1 || count > kMaxLocalRanks)
      return InvalidArgument("--nproc " + std::to_string(count) + " is not in 1.." +
                             std::to_string(kMaxLocalRanks));
  }
  if (!layout.nproc_per_node.empty() &&
      layout.nproc_per_node.size() != static_cast<size_t>(layout.nnodes))
    return InvalidArgument("--nproc gives " + std::to_string(layout.nproc_per_node.size()) +
                           " counts, one per node, for --nnodes " +
                           std::to_string(layout.nnodes));
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
  if (!layout.nproc_per_node.empty()) layout.nproc = layout.nproc_per_node[layout.node_rank];
  return Status::Ok();
}

int FirstRank(const RunLayout& layout) {
  if (layout.nproc_per_node.empty()) return layout.node_rank * layout.nproc;
  return std::accumulate(layout.nproc_per_node.begin(),
                         layout.nproc_per_node.begin() + layout.node_rank, 0);
}

int WorldSize(const RunLayout& layout) {
  if (layout.nproc_per_node.empty()) return layout.nnodes * layout.nproc;
  return std::accumulate(layout.nproc_per_node.begin(), layout.nproc_per_node.end(), 0);
}

std::vector<std::pair<std::string, std::string>> RankEnvironment(const RunLayout& layout,
                                                                 int local_rank,
                                                                 int restart_count) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"EMBER_RANK", std::to_string(FirstRank(layout) + local_rank)},
      {"EMBER_WORLD_SIZE", std::to_string(WorldSize(layout))},
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
