#include "sdk/sync/hierarchical_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include <ATen/core/Tensor.h>

#include "ember/model_sync.h"
#include "sdk/sync/communicator_args.h"
#include "sdk/sync/error_message.h"

namespace ember::sdk {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A leader's outcome of the leaders' level, broadcast on its node: byte 0 is 1 after a
// failure, the rest its message (NUL-terminated).
constexpr int64_t kStatusBytes = 512;

// "0, 1, 2, ..." of at most 8 ranks.
std::string RankList(const std::vector<int>& ranks) {
  std::string list;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) {
    list += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  }
  if (ranks.size() > 8) list += ", ...";
  return list;
}

milliseconds Twice(milliseconds timeout) {
  return timeout.count() > std::numeric_limits<milliseconds::rep>::max() / 2
             ? milliseconds::max()
             : 2 * timeout;
}

milliseconds Left(Clock::time_point deadline) {
  return std::max(milliseconds(1),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// On the ranks of one node: local rank 0 (the leader) sends `tensors` and `failure`, its
// outcome of the leaders' level ("" if it succeeded), to the others. Returns `failure` on
// the leader and the leader's on the others. Throws if the local broadcast fails.
std::string ShareLeaderOutcome(Communicator& local, const std::vector<torch::Tensor>& tensors,
                               const std::string& failure) {
  torch::Tensor status = torch::zeros({kStatusBytes}, torch::kUInt8);
  auto* bytes = status.data_ptr<uint8_t>();
  if (local.rank() == 0 && !failure.empty()) {
    bytes[0] = 1;
    std::memcpy(bytes + 1, failure.data(), std::min<size_t>(failure.size(), kStatusBytes - 2));
  }
  std::vector<torch::Tensor> with_status = tensors;
  with_status.push_back(status);
  local.Broadcast(with_status, 0);
  if (local.rank() == 0) return failure;
  return bytes[0] == 0 ? "" : std::string(reinterpret_cast<const char*>(bytes + 1));
}

// An all-reduce that ran when it was launched: Wait only reports how it went.
class FinishedCollective final : public PendingCollective {
 public:
  explicit FinishedCollective(std::string failure) : failure_(std::move(failure)) {}
  void Wait() override { TORCH_CHECK(failure_.empty(), failure_); }

 private:
  const std::string failure_;
};

class HierarchicalCommunicator final : public Communicator {
 public:
  HierarchicalCommunicator(int rank, NodeLayout layout, std::unique_ptr<Communicator> local,
                           std::unique_ptr<Communicator> leaders, std::string name)
      : rank_(rank),
        layout_(std::move(layout)),
        node_(layout_.node_of_rank.at(rank)),
        local_rank_(layout_.LocalRank(rank)),
        local_(std::move(local)),
        leaders_(std::move(leaders)),
        name_(std::move(name)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return static_cast<int>(layout_.node_of_rank.size()); }

  std::shared_ptr<PendingCollective> AllReduceSumAsync(
      std::vector<torch::Tensor>& tensors) override {
    const char* op = "all-reduce";
    errors_.CheckUsable(Where(op));
    CheckCpuTensors(tensors, Where(op), /*bool_ok=*/false);
    try {
      errors_.Guard([&] { AllReduceNow(tensors); });
    } catch (const std::exception& e) {
      return std::make_shared<FinishedCollective>(ErrorMessage(e));
    }
    return std::make_shared<FinishedCollective>("");
  }

  void Broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    const char* op = "broadcast";
    TORCH_CHECK(root >= 0 && root < world_size(), Where(op), ": root ", root,
                " is not a rank of this world");
    errors_.CheckUsable(Where(op));
    CheckCpuTensors(tensors, Where(op), /*bool_ok=*/false);
    errors_.Guard([&] {
      const int root_node = layout_.node_of_rank[root];
      if (root_node == node_) {
        if (local_) Local(op, [&] { local_->Broadcast(tensors, layout_.LocalRank(root)); });
        std::string failure;
        if (leaders_) failure = Leaders([&] { leaders_->Broadcast(tensors, root_node); });
        ThrowIfLeadersFailed(op, failure);
      } else {
        std::string failure;
        if (leaders_) failure = Leaders([&] { leaders_->Broadcast(tensors, root_node); });
        FinishOnNode(op, tensors, failure);
      }
    });
  }

 private:
  std::string Where(const char* op) const {
    return "hierarchical " + std::string(op) + " (group '" + name_ + "', rank " +
           std::to_string(rank_) + " of " + std::to_string(world_size()) + ", node " +
           std::to_string(node_) + " of " + std::to_string(layout_.ranks_of_node.size()) + ")";
  }

  void AllReduceNow(std::vector<torch::Tensor>& tensors) {
    const char* op = "all-reduce";
    if (local_) Local(op, [&] { local_->AllReduceSum(tensors); });
    std::string failure;
    if (leaders_) failure = Leaders([&] { leaders_->AllReduceSum(tensors); });
    FinishOnNode(op, tensors, failure);
  }

  template <typename F>
  void Local(const char* op, F&& collective) {
    try {
      collective();
    } catch (const std::exception& e) {
      TORCH_CHECK(false, Where(op), ": the local level (shared memory among the node's ",
                  local_->world_size(), " ranks) failed: ", ErrorMessage(e));
    }
  }

  // The leaders' collective's error message, "" if it succeeded.
  template <typename F>
  std::string Leaders(F&& collective) {
    try {
      collective();
      return "";
    } catch (const std::exception& e) {
      const std::string message = ErrorMessage(e);
      return message.empty() ? "unknown error" : message;
    }
  }

  void ThrowIfLeadersFailed(const char* op, const std::string& failure) const {
    TORCH_CHECK(failure.empty(), Where(op), ": the leaders' level (Gloo among the ",
                layout_.ranks_of_node.size(), " nodes' leaders) failed: ", failure);
  }

  // The last step on a node: its leader broadcasts `tensors` and how the leaders' level
  // went (`failure`, "" if it succeeded) to the node's other ranks.
  void FinishOnNode(const char* op, std::vector<torch::Tensor>& tensors,
                    const std::string& failure) {
    std::string leaders_failure = failure;
    if (local_) {
      try {
        leaders_failure = ShareLeaderOutcome(*local_, tensors, failure);
      } catch (const std::exception& e) {
        ThrowIfLeadersFailed(op, failure);  // the first cause, on the leader
        TORCH_CHECK(false, Where(op), ": the local level (shared memory among the node's ",
                    local_->world_size(), " ranks) failed: ", ErrorMessage(e));
      }
    }
    TORCH_CHECK(local_rank_ == 0 || leaders_failure.empty(), Where(op),
                ": the leaders' level failed on this node's leader, rank ",
                layout_.ranks_of_node[node_][0], ": ", leaders_failure);
    ThrowIfLeadersFailed(op, failure);
  }

  const int rank_;
  const NodeLayout layout_;
  const int node_;
  const int local_rank_;
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> leaders_;
  const std::string name_;
  FirstError errors_;
};

// What rank 0 publishes: "ok <node of rank 0>,<node of rank 1>,..." or "error <message>".
std::string EncodeLayout(const NodeLayout& layout) {
  std::string text = "ok ";
  for (size_t r = 0; r < layout.node_of_rank.size(); ++r) {
    text += (r == 0 ? "" : ",") + std::to_string(layout.node_of_rank[r]);
  }
  return text;
}

NodeLayout DecodeLayout(const std::string& text, int world_size) {
  TORCH_CHECK(text.rfind("error ", 0) != 0, "rank 0 found: ", text.substr(6));
  TORCH_CHECK(text.rfind("ok ", 0) == 0, "rank 0 published a malformed layout '", text, "'");
  std::vector<std::string> keys;
  std::stringstream nodes(text.substr(3));
  for (std::string node; std::getline(nodes, node, ',');) keys.push_back(node);
  TORCH_CHECK(static_cast<int>(keys.size()) == world_size, "rank 0 was started with world size ",
              keys.size(), ", this rank with ", world_size,
              " (every rank of the group must be given the same world size)");
  return LayoutFromNodeKeys(keys);
}

// Rank 0's part: every rank's "<world size>,<local world size>,<node key>", checked.
std::string GatherLayout(Client& client, const std::string& job, const std::string& prefix,
                         int world_size, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> keys;
  std::vector<int> local_sizes;
  for (int peer = 0; peer < world_size; ++peer) {
    const std::string key = prefix + "/rank/" + std::to_string(peer);
    Result<std::string> value = client.KvGet(job, key, Left(deadline));
    if (!value.ok()) {
      return "error rank " + std::to_string(peer) + " did not join within " +
             std::to_string(timeout.count()) + " ms (" + value.status().ToString() + ")";
    }
    const size_t first = value->find(',');
    const size_t second = value->find(',', first + 1);
    if (first == std::string::npos || second == std::string::npos) {
      return "error rank " + std::to_string(peer) + " published '" + *value + "' under " + key;
    }
    const std::string theirs = value->substr(0, first);
    if (theirs != std::to_string(world_size)) {
      return "error rank " + std::to_string(peer) + " was started with world size " + theirs +
             ", rank 0 with " + std::to_string(world_size) +
             " (every rank of the group must be given the same world size)";
    }
    local_sizes.push_back(std::stoi(value->substr(first + 1, second - first - 1)));
    keys.push_back(value->substr(second + 1));
  }
  const NodeLayout layout = LayoutFromNodeKeys(keys);
  for (int peer = 0; peer < world_size; ++peer) {
    const std::vector<int>& node = layout.ranks_of_node[layout.node_of_rank[peer]];
    if (local_sizes[peer] != 0 && local_sizes[peer] != static_cast<int>(node.size())) {
      return "error rank " + std::to_string(peer) + " was started with local world size " +
             std::to_string(local_sizes[peer]) + ", but " + std::to_string(node.size()) +
             " rank(s) of the job are on its node '" + keys[peer] + "': " + RankList(node);
    }
  }
  return EncodeLayout(layout);
}

NodeLayout RendezvousLayout(Client& client, const std::string& job, int rank, int world_size,
                            milliseconds timeout, const std::string& name,
                            const std::string& node_key, int local_world_size) {
  const std::string prefix = "ember/hier/" + name;
  Status set = client.KvSet(job, prefix + "/rank/" + std::to_string(rank),
                            std::to_string(world_size) + "," +
                                std::to_string(local_world_size) + "," + node_key);
  TORCH_CHECK(set.ok(), "publishing this rank's node: ", set.ToString());
  if (rank == 0) {
    const std::string layout = GatherLayout(client, job, prefix, world_size, timeout);
    set = client.KvSet(job, prefix + "/layout", layout);
    TORCH_CHECK(set.ok(), "publishing the layout: ", set.ToString());
    return DecodeLayout(layout, world_size);
  }
  Result<std::string> layout = client.KvGet(job, prefix + "/layout", Twice(timeout));
  TORCH_CHECK(layout.ok(), "rank 0 published no node layout within ", Twice(timeout).count(),
              " ms (", layout.status().ToString(), ")");
  return DecodeLayout(*layout, world_size);
}

}  // namespace

int NodeLayout::LocalRank(int rank) const {
  const std::vector<int>& ranks = ranks_of_node.at(node_of_rank.at(rank));
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

NodeLayout LayoutFromNodeKeys(const std::vector<std::string>& keys) {
  NodeLayout layout;
  std::map<std::string, int> node_of_key;
  for (size_t rank = 0; rank < keys.size(); ++rank) {
    auto [it, inserted] =
        node_of_key.try_emplace(keys[rank], static_cast<int>(layout.ranks_of_node.size()));
    if (inserted) layout.ranks_of_node.emplace_back();
    layout.node_of_rank.push_back(it->second);
    layout.ranks_of_node[it->second].push_back(static_cast<int>(rank));
  }
  return layout;
}

std::string NodeKey(const Client& client) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown-host");
  return std::string(host) + ":" + client.socket_path();
}

std::unique_ptr<Communicator> MakeHierarchicalCommunicator(int rank, NodeLayout layout,
                                                           std::unique_ptr<Communicator> local,
                                                           std::unique_ptr<Communicator> leaders,
                                                           const std::string& name) {
  const int world_size = static_cast<int>(layout.node_of_rank.size());
  const std::string where = "hierarchical communicator '" + name + "' (rank " +
                            std::to_string(rank) + " of " + std::to_string(world_size) + ")";
  TORCH_CHECK(rank >= 0 && rank < world_size, where, ": rank is outside the world");
  const int node = layout.node_of_rank[rank];
  const int nodes = static_cast<int>(layout.ranks_of_node.size());
  const int local_size = static_cast<int>(layout.ranks_of_node[node].size());
  const int local_rank = layout.LocalRank(rank);
  TORCH_CHECK((local_size > 1) == (local != nullptr), where, ": node ", node, " has ",
              local_size, " rank(s), so it needs ", local_size > 1 ? "a" : "no",
              " local communicator");
  TORCH_CHECK(!local || (local->world_size() == local_size && local->rank() == local_rank),
              where, ": the local communicator is rank ", local->rank(), " of ",
              local->world_size(), ", not ", local_rank, " of ", local_size);
  const bool needs_leaders = local_rank == 0 && nodes > 1;
  TORCH_CHECK(needs_leaders == (leaders != nullptr), where, ": this rank ",
              needs_leaders ? "leads" : "does not lead", " node ", node, " of ", nodes,
              ", so it needs ", needs_leaders ? "a" : "no", " leaders' communicator");
  TORCH_CHECK(!leaders || (leaders->world_size() == nodes && leaders->rank() == node), where,
              ": the leaders' communicator is rank ", leaders->rank(), " of ",
              leaders->world_size(), ", not ", node, " of ", nodes);
  return std::make_unique<HierarchicalCommunicator>(rank, std::move(layout), std::move(local),
                                                    std::move(leaders), name);
}

std::unique_ptr<Communicator> MakeHierarchicalCommunicator(Client& client, const std::string& job,
                                                           int rank, int world_size,
                                                           milliseconds timeout,
                                                           const std::string& name,
                                                           const std::string& node_key,
                                                           int local_world_size) {
  const std::string where =
      CheckCommunicatorArgs("hierarchical", name, rank, world_size, timeout);
  NodeLayout layout;
  try {
    layout = RendezvousLayout(client, job, rank, world_size, timeout, name, node_key,
                              local_world_size);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, where, ": rendezvous failed: ", ErrorMessage(e));
  }
  const int nodes = static_cast<int>(layout.ranks_of_node.size());
  if (nodes == 1) {
    return MakeSharedMemoryCommunicator(client, job, rank, world_size, timeout, name);
  }
  if (nodes == world_size) {
    return MakeGlooCommunicator(client, job, rank, world_size, timeout, name,
                                /*across_nodes=*/true);
  }
  const int node = layout.node_of_rank[rank];
  const int local_size = static_cast<int>(layout.ranks_of_node[node].size());
  const int local_rank = layout.LocalRank(rank);
  std::unique_ptr<Communicator> local;
  if (local_size > 1) {
    try {
      local = MakeSharedMemoryCommunicator(client, job, local_rank, local_size,
                                           local_rank == 0 ? timeout : Twice(timeout),
                                           name + "/node" + std::to_string(node));
    } catch (const std::exception& e) {
      TORCH_CHECK(false, where, ": the local level (shared memory among node ", node, "'s ",
                  local_size, " ranks) failed: ", ErrorMessage(e));
    }
  }
  std::unique_ptr<Communicator> leaders;
  std::string failure;
  if (local_rank == 0) {
    try {
      leaders = MakeGlooCommunicator(client, job, node, nodes, timeout, name + "/leaders",
                                     /*across_nodes=*/true);
    } catch (const std::exception& e) {
      failure = ErrorMessage(e);
    }
  }
  // The node's other ranks learn whether their leader joined the leaders.
  if (local) {
    try {
      failure = ShareLeaderOutcome(*local, {}, failure);
    } catch (const std::exception& e) {
      TORCH_CHECK(!failure.empty(), where, ": the local level (shared memory among node ", node,
                  "'s ", local_size, " ranks) failed: ", ErrorMessage(e));
    }
  }
  TORCH_CHECK(failure.empty(), where,
              local_rank == 0 ? ": the leaders' level (Gloo among the " + std::to_string(nodes) +
                                    " nodes' leaders) failed: "
                              : ": the leaders' level failed on this node's leader, rank " +
                                    std::to_string(layout.ranks_of_node[node][0]) + ": ",
              failure);
  return MakeHierarchicalCommunicator(rank, std::move(layout), std::move(local),
                                      std::move(leaders), name);
}

}  // namespace ember::sdk
