// Hierarchical CPU collectives for a job that spans nodes (internal; MakeCommunicator
// chooses it): shared memory among the ranks of each node, Gloo between one leader per
// node (its lowest rank).
//
//   all-reduce: sum on each node (shared memory), sum across the leaders (Gloo), then
//               each leader broadcasts the result on its node, so every rank ends with
//               the same bits;
//   broadcast:  on the root's node from the root, across the leaders from the root's
//               node's leader, then on every other node from its leader.
//
// Every collective runs on the calling thread (Gloo's own threads aside). AllReduceSumAsync
// runs the all-reduce before it returns, so nothing overlaps; its Wait only reports the
// outcome.
#ifndef EMBER_SDK_SYNC_HIERARCHICAL_COMMUNICATOR_H_
#define EMBER_SDK_SYNC_HIERARCHICAL_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ember/client.h"
#include "ember/communicator.h"

namespace ember::sdk {

// Which node each rank of a job is on. Nodes are numbered 0, 1, ... in the order of
// their lowest rank; the lowest rank of a node is its leader.
struct NodeLayout {
  std::vector<int> node_of_rank;                // indexed by rank
  std::vector<std::vector<int>> ranks_of_node;  // ascending; indexed by node

  // The position of `rank` among the ranks of its node.
  int LocalRank(int rank) const;
};

// The layout of ranks 0 .. keys.size()-1 where rank r runs on the node named keys[r]:
// ranks with equal keys share a node. Any assignment is valid (a node's ranks need not
// be contiguous, nodes may hold different numbers of ranks).
NodeLayout LayoutFromNodeKeys(const std::vector<std::string>& keys);

// The name of the node this process is on, as the hierarchical rendezvous compares it:
// "<host name>:<socket path of `client`>". Ranks that reach one emberd through one path
// on one host share shared memory; any other pair is treated as on different nodes.
std::string NodeKey(const Client& client);

// Composes the two levels for `rank` of `layout`. `local` joins the ranks of this rank's
// node (its rank there is LocalRank(rank)); null when the node has one rank. `leaders`
// joins the node leaders (its rank there is the node's index); given on a leader when
// there are several nodes, null otherwise. A non-leader's `local` should have a longer
// timeout than its leader's `leaders` (the factory below gives it twice), so that it
// learns why the leaders' level failed rather than timing out first.
// Errors throw c10::Error: "hierarchical <op> (group '<name>', rank R of W, node N of M):
// the local level (...) failed: ..." or "... the leaders' level (...) failed: ...", or on
// a non-leader "... the leaders' level failed on this node's leader, rank L: ...". After
// an error the communicator is unusable. Throws at once if the levels do not fit `layout`.
std::unique_ptr<Communicator> MakeHierarchicalCommunicator(int rank, NodeLayout layout,
                                                           std::unique_ptr<Communicator> local,
                                                           std::unique_ptr<Communicator> leaders,
                                                           const std::string& name);

// The communicator for `rank` of a CPU job spanning nodes, its layout learnt through
// `client`'s store (keys "ember/hier/<name>/..." of `job`): every rank publishes its
// `node_key` (NodeKey in production; tests pick their own), world size and
// `local_world_size` (0: unchecked); rank 0 checks them and publishes the layout or the
// error, so that all ranks fail alike. Then: with one node, the shared-memory
// communicator named `name` among all ranks; with one rank per node, Gloo named `name`
// between all ranks; else the two levels above: shared memory named "<name>/node<N>"
// on node N and Gloo (across nodes) named "<name>/leaders".
// `timeout` bounds the rendezvous and each level of every collective; a rank waiting on
// its leader (or on rank 0's layout) waits up to twice that, so a collective fails on
// every rank within about 2 x `timeout` of a peer stopping. Blocks until every rank has
// joined. Throws c10::Error "hierarchical communicator '<name>' (rank R of W): ..." naming
// the level that failed, or a mismatch: two world sizes, or a local world size unlike
// the number of ranks found on that rank's node. `client` must outlive the result.
std::unique_ptr<Communicator> MakeHierarchicalCommunicator(Client& client, const std::string& job,
                                                           int rank, int world_size,
                                                           std::chrono::milliseconds timeout,
                                                           const std::string& name,
                                                           const std::string& node_key,
                                                           int local_world_size);

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_HIERARCHICAL_COMMUNICATOR_H_
