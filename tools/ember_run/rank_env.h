// What ember-run gives the local ranks it starts: the layout of the run over nodes, checked
// once from the flags, and the environment of each rank (read back by ReadLaunchEnv,
// sdk/include/ember/launch_env.h).
//
// Glossary: N nodes each run one ember-run starting M local ranks; node K's local rank i is
// global rank K*M + i of N*M. With a count per node (--nproc M0,M1,...), node K's local
// rank i is global rank M0+...+M(K-1) + i of M0+...+M(N-1).
#ifndef EMBER_TOOLS_EMBER_RUN_RANK_ENV_H_
#define EMBER_TOOLS_EMBER_RUN_RANK_ENV_H_

#include <string>
#include <utility>
#include <vector>

#include "ember/status.h"

namespace ember::tools {

// The most local ranks one ember-run starts.
inline constexpr int kMaxLocalRanks = 1024;

// The flags of one node's ember-run that shape its ranks' environment.
struct RunLayout {
  int nnodes = 1;
  int node_rank = 0;
  int nproc = 1;            // local ranks on this node
  // Every node's count, node by node (--nproc M0,M1,...); empty: nproc on every node.
  std::vector<int> nproc_per_node{};
  std::string job{};        // empty: none given
  std::string socket{};     // emberd's unix socket; empty: the ranks inherit EMBER_SOCKET
  std::string coordinator{};  // HOST:PORT; empty: the ranks inherit EMBER_COORDINATOR
};

// --nproc's value into `layout`: "M" (every node's count) or "M0,M1,..." (one per node,
// checked against --nnodes by CheckRunLayout). kInvalidArgument naming the value otherwise.
Status ParseNproc(const std::string& text, RunLayout* layout);

// Ok, or kInvalidArgument naming the flag and its value: a count below 1, a node rank not
// below the node count, counts per node that are not --nnodes of them, a coordinator that
// is not HOST:PORT, or no job with several nodes (each node's ember-run would make up its
// own). Sets layout->nproc to this node's count when counts are given per node.
Status CheckRunLayout(RunLayout* layout);

// This node's first global rank, and the ranks of all nodes (layout checked).
int FirstRank(const RunLayout& layout);
int WorldSize(const RunLayout& layout);

// The variables local rank `local_rank` gets on its run `restart_count` (0 first):
// EMBER_RANK, EMBER_WORLD_SIZE, EMBER_LOCAL_RANK, EMBER_LOCAL_WORLD_SIZE, EMBER_NODE_RANK,
// EMBER_NNODES, EMBER_RESTART_COUNT, EMBER_JOB, and EMBER_SOCKET / EMBER_COORDINATOR
// where given. `layout` must have passed CheckRunLayout.
std::vector<std::pair<std::string, std::string>> RankEnvironment(const RunLayout& layout,
                                                                 int local_rank, int restart_count);

}  // namespace ember::tools

#endif  // EMBER_TOOLS_EMBER_RUN_RANK_ENV_H_
