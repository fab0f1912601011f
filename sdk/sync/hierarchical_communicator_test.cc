#include "sdk/sync/hierarchical_communicator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/types.h>

#include "sdk/sync/error_of_testing.h"
#include "sdk/sync/gloo_communicator.h"
#include "sdk/sync/shm_communicator.h"

namespace ember::sdk {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A zero-filled memfd for a shared-memory group of `world`, closed by the destructor.
struct Segment {
  explicit Segment(int world) : fd(memfd_create("hierarchical_communicator_test", MFD_CLOEXEC)) {
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, static_cast<off_t>(ShmSegmentBytes(world))) == 0);
  }
  ~Segment() { close(fd); }
  int fd;
};

// Runs `body(rank, comm)` for every rank on its own thread, rank r on node keys[r]: shared
// memory per node, Gloo (on loopback, through one in-process store) between the leaders,
// with the factory's timeouts (a non-leader's local level waits twice `timeout`). Returns
// each rank's error message ("" if none).
std::vector<std::string> RunRanks(const std::vector<std::string>& keys,
                                  const std::function<void(int, Communicator&)>& body,
                                  milliseconds timeout = milliseconds(20000)) {
  const NodeLayout layout = LayoutFromNodeKeys(keys);
  const int nodes = static_cast<int>(layout.ranks_of_node.size());
  std::vector<std::unique_ptr<Segment>> segments;
  for (const std::vector<int>& ranks : layout.ranks_of_node) {
    segments.push_back(std::make_unique<Segment>(static_cast<int>(ranks.size())));
  }
  auto store = c10::make_intrusive<c10d::HashStore>();
  return ErrorsOfThreads(static_cast<int>(keys.size()), [&](int rank) {
    const int node = layout.node_of_rank[rank];
    const int local_size = static_cast<int>(layout.ranks_of_node[node].size());
    const int local_rank = layout.LocalRank(rank);
    std::unique_ptr<Communicator> local, leaders;
    if (local_size > 1) {
      local = MakeShmCommunicator(segments[node]->fd, local_rank, local_size,
                                  local_rank == 0 ? timeout : 2 * timeout,
                                  "node" + std::to_string(node));
    }
    if (local_rank == 0 && nodes > 1) {
      leaders = MakeGlooCommunicator(store, node, nodes, timeout, "leaders");
    }
    auto comm =
        MakeHierarchicalCommunicator(rank, layout, std::move(local), std::move(leaders), "test");
    body(rank, *comm);
  });
}

void ExpectNoErrors(const std::vector<std::string>& errors) {
  for (size_t rank = 0; rank < errors.size(); ++rank) {
    INFO("rank " << rank);
    CHECK(errors[rank] == "");
  }
}

bool SameBits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

// Rank `rank`'s contribution: distinct per rank and element, exact in every dtype used.
torch::Tensor Values(int rank, int64_t n, torch::ScalarType dtype) {
  return (torch::arange(n, torch::kInt64) % 1000 + 7 * rank).to(dtype);
}

// All-reduces tensors of several sizes and dtypes (one larger than a shared-memory chunk,
// one strided) and random floats, then broadcasts from every rank in turn; checks the
// exact sums and the roots' values on every rank, and the same float bits everywhere.
void CheckCollectives(const std::vector<std::string>& keys) {
  const int world = static_cast<int>(keys.size());
  const int64_t big = static_cast<int64_t>(kShmChunkBytes) / 4 + 999;
  int64_t rank_sum = 0;
  for (int rank = 0; rank < world; ++rank) rank_sum += rank;
  // Made here: the default generator is not for several threads at once.
  std::vector<torch::Tensor> randoms;
  torch::Tensor sum = torch::zeros({10000});
  for (int rank = 0; rank < world; ++rank) {
    randoms.push_back(torch::randn({10000}, torch::kFloat32));
    sum += randoms.back();
  }
  std::vector<torch::Tensor> floats(world);
  ExpectNoErrors(RunRanks(keys, [&](int rank, Communicator& comm) {
    CHECK(comm.rank() == rank);
    CHECK(comm.world_size() == world);
    std::vector<torch::Tensor> tensors = {
        Values(rank, big, torch::kFloat32),
        Values(rank, 3, torch::kInt64),
        Values(rank, 12, torch::kFloat64).view({3, 4}).t(),
        randoms[rank].clone(),
    };
    comm.AllReduceSum(tensors);
    auto expected = [&](int64_t n, torch::ScalarType dtype) {
      return (torch::arange(n, torch::kInt64) % 1000 * world + 7 * rank_sum).to(dtype);
    };
    CHECK(torch::equal(tensors[0], expected(big, torch::kFloat32)));
    CHECK(torch::equal(tensors[1], expected(3, torch::kInt64)));
    CHECK(torch::equal(tensors[2], expected(12, torch::kFloat64).view({3, 4}).t()));
    floats[rank] = tensors[3];
    for (int root = 0; root < world; ++root) {
      std::vector<torch::Tensor> mine = {Values(rank, big, torch::kFloat32),
                                         torch::full({5}, rank, torch::kInt64)};
      comm.Broadcast(mine, root);
      CHECK(torch::equal(mine[0], Values(root, big, torch::kFloat32)));
      CHECK(torch::equal(mine[1], torch::full({5}, root, torch::kInt64)));
    }
  }));
  for (int rank = 0; rank < world; ++rank) {
    INFO("rank " << rank);
    CHECK(SameBits(floats[rank], floats[0]));
    CHECK(torch::allclose(floats[rank], sum, 1e-4, 1e-5));
  }
}

TEST_CASE("the layout groups ranks by node key, in any order and any sizes") {
  const NodeLayout layout = LayoutFromNodeKeys({"b", "a", "b", "c", "a", "b"});
  CHECK(layout.node_of_rank == std::vector<int>{0, 1, 0, 2, 1, 0});
  CHECK(layout.ranks_of_node == std::vector<std::vector<int>>{{0, 2, 5}, {1, 4}, {3}});
  CHECK(layout.LocalRank(5) == 2);
  CHECK(layout.LocalRank(4) == 1);
  CHECK(layout.LocalRank(3) == 0);
}

TEST_CASE("2 nodes x 2 ranks: exact sums and broadcasts from every root on every rank") {
  CheckCollectives({"n0", "n0", "n1", "n1"});
}

TEST_CASE("uneven, interleaved nodes (3 + 2 + 1 ranks) work as well") {
  CheckCollectives({"a", "b", "a", "c", "b", "a"});
}

TEST_CASE("async all-reduces may be waited in any order, and again") {
  ExpectNoErrors(RunRanks({"n0", "n0", "n1"}, [&](int rank, Communicator& comm) {
    std::vector<torch::Tensor> first = {torch::full({3}, rank + 1.0)};
    std::vector<torch::Tensor> second = {torch::full({3}, 10.0 * (rank + 1))};
    auto a = comm.AllReduceSumAsync(first);
    auto b = comm.AllReduceSumAsync(second);
    b->Wait();
    a->Wait();
    a->Wait();
    CHECK(torch::equal(first[0], torch::full({3}, 6.0)));
    CHECK(torch::equal(second[0], torch::full({3}, 60.0)));
    std::vector<torch::Tensor> third = {torch::full({2}, 1.0)};
    auto c = comm.AllReduceSumAsync(third);
    std::vector<torch::Tensor> root = {torch::full({2}, static_cast<double>(rank))};
    comm.Broadcast(root, 2);
    CHECK(torch::equal(root[0], torch::full({2}, 2.0)));
    c->Wait();
    CHECK(torch::equal(third[0], torch::full({2}, 3.0)));
  }));
}

TEST_CASE("a rank that stops fails every rank within twice the timeout, naming the level") {
  const milliseconds timeout(1500);
  const auto start = Clock::now();
  // Rank 3, node 1's second rank, never all-reduces: its leader (rank 2) fails at the
  // local level, so rank 0 fails at the leaders' level and tells rank 1.
  const std::vector<std::string> errors = RunRanks(
      {"n0", "n0", "n1", "n1"},
      [&](int rank, Communicator& comm) {
        if (rank == 3) return;
        std::vector<torch::Tensor> tensors = {torch::ones({4})};
        const std::string failure = ErrorOf([&] { comm.AllReduceSum(tensors); });
        CHECK(ErrorOf([&] { comm.Broadcast(tensors, 0); })
                  .find("communicator is unusable after an earlier error") != std::string::npos);
        TORCH_CHECK(failure.empty(), failure);
      },
      timeout);
  CHECK(Clock::now() - start < 2 * timeout + std::chrono::seconds(3));
  for (const std::string& error : errors) INFO(error);
  CHECK(errors[0].find("hierarchical all-reduce (group 'test', rank 0 of 4, node 0 of 2): the "
                       "leaders' level (Gloo among the 2 nodes' leaders) failed: gloo all-reduce "
                       "(group 'leaders', rank 0 of 2) failed") == 0);
  CHECK(errors[1].find("hierarchical all-reduce (group 'test', rank 1 of 4, node 0 of 2): the "
                       "leaders' level failed on this node's leader, rank 0: gloo all-reduce") ==
        0);
  CHECK(errors[2].find("hierarchical all-reduce (group 'test', rank 2 of 4, node 1 of 2): the "
                       "local level (shared memory among the node's 2 ranks) failed: "
                       "shared-memory all-reduce (group 'node1', rank 0 of 2) failed: timed out "
                       "after 1500 ms waiting for rank(s) 1") == 0);
  CHECK(errors[3] == "");
}

TEST_CASE("bad tensors are refused by name on every rank, before any communication") {
  const std::vector<std::string> errors = RunRanks({"n0", "n1", "n1"}, [&](int, Communicator& comm) {
    std::vector<torch::Tensor> flags = {torch::ones({2}, torch::kBool)};
    CHECK(ErrorOf([&] { comm.AllReduceSum(flags); }).find(
              "tensor 0 is bool, which has no sum") !=
          std::string::npos);
    std::vector<torch::Tensor> ones = {torch::ones({2})};
    comm.AllReduceSum(ones);  // still usable
    CHECK(torch::equal(ones[0], torch::full({2}, 3.0f)));
    std::vector<torch::Tensor> undefined = {torch::Tensor()};
    comm.Broadcast(undefined, 0);
  });
  CHECK(errors[0] == "hierarchical broadcast (group 'test', rank 0 of 3, node 0 of 2): tensor 0 "
                     "is undefined");
  CHECK(errors[2] == "hierarchical broadcast (group 'test', rank 2 of 3, node 1 of 2): tensor 0 "
                     "is undefined");
}

TEST_CASE("levels that do not fit the layout are refused") {
  const NodeLayout layout = LayoutFromNodeKeys({"n0", "n0", "n1"});
  CHECK(ErrorOf([&] { MakeHierarchicalCommunicator(0, layout, nullptr, nullptr, "x"); }) ==
        "hierarchical communicator 'x' (rank 0 of 3): node 0 has 2 rank(s), so it needs a local "
        "communicator");
  CHECK(ErrorOf([&] { MakeHierarchicalCommunicator(2, layout, nullptr, nullptr, "x"); }) ==
        "hierarchical communicator 'x' (rank 2 of 3): this rank leads node 1 of 2, so it needs a "
        "leaders' communicator");
  CHECK(ErrorOf([&] { MakeHierarchicalCommunicator(3, layout, nullptr, nullptr, "x"); }) ==
        "hierarchical communicator 'x' (rank 3 of 3): rank is outside the world");
}

}  // namespace
}  // namespace ember::sdk
