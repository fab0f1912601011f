// ember::MakeCommunicator through a real emberd: the backend follows the tensors' device
// (shared memory, hierarchical or Gloo for CPU, NCCL for CUDA), and ModuleDevice finds
// that device.
#include "ember/make_communicator.h"

#include <unistd.h>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "ember/nccl_communicator.h"
#include "tests/support/test_env.h"
#include "sdk/sync/error_of_testing.h"

namespace ember::testing {
namespace {

using std::chrono::milliseconds;

using ember::sdk::ErrorOf;
using ember::sdk::ErrorsOfThreads;

// Two ranks, each on its own thread and connection: every rank all-reduces (rank + 1)
// through the communicator MakeCommunicator gives it for the CPU, then reports the
// message a bad argument gets from it, which names the backend.
std::vector<std::string> TwoCpuRanks(const Daemon& daemon, const std::string& job,
                                     const CommunicatorOptions& options) {
  return ErrorsOfThreads(2, [&](int rank) {
    auto client = daemon.Connect();
    std::unique_ptr<Communicator> comm =
        MakeCommunicator(*client, job, rank, 2, torch::kCPU, options);
    std::vector<torch::Tensor> tensors = {torch::full({1000}, rank + 1.0)};
    comm->AllReduceSum(tensors);
    TORCH_CHECK(torch::equal(tensors[0], torch::full({1000}, 3.0)), "rank ", rank,
                " got a wrong sum");
    std::vector<torch::Tensor> undefined = {torch::Tensor()};
    comm->AllReduceSum(undefined);
  });
}

TEST_CASE("CPU tensors go through shared memory by default and over Gloo when asked") {
  Daemon daemon;
  daemon.Start();
  const CommunicatorOptions shm{.timeout = milliseconds(20000)};
  for (const std::string& message : TwoCpuRanks(daemon, "job-shm", shm)) {
    INFO(message);
    CHECK(message.find("shared-memory all-reduce (group 'default', rank ") == 0);
    CHECK(message.find("tensor 0 is undefined") != std::string::npos);
  }
  const CommunicatorOptions gloo{
      .timeout = milliseconds(20000), .name = "grads", .cpu = CpuCollectives::kGloo};
  for (const std::string& message : TwoCpuRanks(daemon, "job-gloo", gloo)) {
    INFO(message);
    CHECK(message.find("gloo all-reduce (group 'grads', rank ") == 0);
  }
  daemon.Stop();
}

// Ranks spread over nodes that all use this test's one emberd: MakeCommunicator tells
// nodes apart by the host name and the socket path a rank connects through, so rank r
// connects through its node's own link to the daemon's socket, node_of_rank[r]. Every
// rank all-reduces (rank + 1) and broadcasts from the last rank, checking both results,
// and then reports the message an undefined tensor gets, which names the backend.
std::vector<std::string> RanksOnNodes(const Daemon& daemon, const std::string& job,
                                      const std::vector<int>& node_of_rank,
                                      CommunicatorOptions options) {
  const int world = static_cast<int>(node_of_rank.size());
  std::vector<int> local_world(world, 0);
  for (int node : node_of_rank) {
    const std::string link = daemon.dir() + "/node" + std::to_string(node) + ".sock";
    if (access(link.c_str(), F_OK) != 0) REQUIRE(symlink(daemon.socket().c_str(), link.c_str()) == 0);
    for (int rank = 0; rank < world; ++rank) local_world[rank] += node_of_rank[rank] == node;
  }
  return ErrorsOfThreads(world, [&](int rank) {
    ClientOptions client_options;
    client_options.socket_path =
        daemon.dir() + "/node" + std::to_string(node_of_rank[rank]) + ".sock";
    std::unique_ptr<Client> client = Client::Connect(client_options).value();
    CommunicatorOptions mine = options;
    if (mine.local_world_size == 0) mine.local_world_size = local_world[rank];
    std::unique_ptr<Communicator> comm =
        MakeCommunicator(*client, job, rank, world, torch::kCPU, mine);
    std::vector<torch::Tensor> tensors = {torch::full({1000}, rank + 1.0)};
    comm->AllReduceSum(tensors);
    TORCH_CHECK(torch::equal(tensors[0], torch::full({1000}, world * (world + 1) / 2.0)),
                "rank ", rank, " got a wrong sum");
    std::vector<torch::Tensor> root = {torch::full({10}, static_cast<double>(rank))};
    comm->Broadcast(root, world - 1);
    TORCH_CHECK(torch::equal(root[0], torch::full({10}, world - 1.0)), "rank ", rank,
                " got a wrong broadcast");
    std::vector<torch::Tensor> undefined = {torch::Tensor()};
    comm->AllReduceSum(undefined);
  });
}

TEST_CASE("across nodes, CPU tensors go through shared memory per node and Gloo between leaders") {
  Daemon daemon;
  daemon.Start();
  const milliseconds timeout(20000);
  const std::vector<std::string> two_by_two =
      RanksOnNodes(daemon, "job-2x2", {0, 0, 1, 1}, {.timeout = timeout});
  for (int rank = 0; rank < 4; ++rank) {
    INFO(two_by_two[rank]);
    CHECK(two_by_two[rank].find("hierarchical all-reduce (group 'default', rank " +
                                std::to_string(rank) + " of 4, node " +
                                std::to_string(rank / 2) + " of 2): tensor 0 is undefined") == 0);
  }
  // Uneven and interleaved: node 0 holds ranks 0, 2 and 3, node 1 rank 1.
  for (const std::string& message :
       RanksOnNodes(daemon, "job-uneven", {0, 1, 0, 0}, {.timeout = timeout})) {
    INFO(message);
    CHECK(message.find("hierarchical all-reduce (group 'default', rank ") == 0);
  }
  // One rank per node: Gloo between all ranks, no shared-memory level.
  for (const std::string& message :
       RanksOnNodes(daemon, "job-singles", {0, 1, 2}, {.timeout = timeout})) {
    INFO(message);
    CHECK(message.find("gloo all-reduce (group 'default', rank ") == 0);
  }
  // Asked for Gloo: between all ranks.
  for (const std::string& message :
       RanksOnNodes(daemon, "job-gloo", {0, 0, 1, 1},
                    {.timeout = timeout, .name = "grads", .cpu = CpuCollectives::kGloo})) {
    INFO(message);
    CHECK(message.find("gloo all-reduce (group 'grads', rank ") == 0);
  }
  daemon.Stop();
}

TEST_CASE("a local world size unlike the ranks found on the node fails every rank at once") {
  Daemon daemon;
  daemon.Start();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> messages = RanksOnNodes(
      daemon, "job-wrong-local", {0, 0, 0, 0},
      {.timeout = milliseconds(60000), .local_world_size = 2});
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));  // not timeouts
  for (int rank = 0; rank < 4; ++rank) {
    INFO(messages[rank]);
    CHECK(messages[rank].find("hierarchical communicator 'default' (rank " +
                              std::to_string(rank) + " of 4): rendezvous failed: ") == 0);
    CHECK(messages[rank].find("rank 0 was started with local world size 2, but 4 rank(s) of the "
                              "job are on its node '") != std::string::npos);
    CHECK(messages[rank].find("node0.sock': 0, 1, 2, 3") != std::string::npos);
  }
  daemon.Stop();
}

TEST_CASE("CUDA tensors go over NCCL; other devices are refused by name") {
  Daemon daemon;
  daemon.Start();
  auto client = daemon.Connect();
  const torch::Device gpu(torch::kCUDA, 0);
  if (CudaDeviceAvailable()) {
    std::unique_ptr<Communicator> comm =
        MakeCommunicator(*client, "job-nccl", 0, 1, gpu, {.timeout = milliseconds(20000)});
    std::vector<torch::Tensor> on_host = {torch::zeros({4})};
    CHECK(ErrorOf([&] { comm->AllReduceSum(on_host); }).find("nccl all-reduce") == 0);
  } else {
    const std::string message = ErrorOf([&] {
      MakeCommunicator(*client, "job-nccl", 0, 1, gpu, {.timeout = milliseconds(20000)});
    });
    INFO(message);
    CHECK(message.find("nccl init (group 'default', rank 0 of 1, cuda device 0)") == 0);
  }
  const std::string meta =
      ErrorOf([&] { MakeCommunicator(*client, "job-meta", 1, 2, torch::Device(torch::kMeta)); });
  CHECK(meta ==
        "no gradient-sync backend for tensors on meta (job 'job-meta', rank 1 of 2): NCCL "
        "serves cuda, shared memory and Gloo serve cpu");
  daemon.Stop();
}

// Rank 0 started with world size 2 and rank 1 with 3, each on its own thread and
// connection: each must fail naming the other's size and its own.
void CheckMismatchedWorldsFail(const Daemon& daemon, const std::string& job,
                               const torch::Device& device, const CommunicatorOptions& options) {
  std::vector<std::string> messages = ErrorsOfThreads(2, [&](int rank) {
    auto client = daemon.Connect();
    MakeCommunicator(*client, job, rank, 2 + rank, device, options);
  });
  INFO(messages[0] + "\n" + messages[1]);
  CHECK(messages[0].find("rank 1 was started with world size 3, this rank with 2") !=
        std::string::npos);
  CHECK(messages[1].find("rank 0 was started with world size 2, this rank with 3") !=
        std::string::npos);
}

TEST_CASE("ranks given different world sizes fail at once on every backend, naming both") {
  Daemon daemon;
  daemon.Start();
  const auto start = std::chrono::steady_clock::now();
  const milliseconds timeout(60000);
  CheckMismatchedWorldsFail(daemon, "job-shm", torch::kCPU, {.timeout = timeout});
  CheckMismatchedWorldsFail(daemon, "job-gloo", torch::kCPU,
                            {.timeout = timeout, .cpu = CpuCollectives::kGloo});
  // Checked through the daemon's store before CUDA is touched: the same with or without a GPU.
  CheckMismatchedWorldsFail(daemon, "job-nccl", torch::Device(torch::kCUDA, 0),
                            {.timeout = timeout});
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));  // not timeouts
  daemon.Stop();
}

TEST_CASE("ModuleDevice is the one device of a module's parameters and buffers") {
  torch::nn::Linear linear(3, 2);
  CHECK(ModuleDevice(*linear) == torch::Device(torch::kCPU));
  torch::nn::BatchNorm1d norm(4);  // buffers too
  norm->register_buffer("elsewhere", torch::empty({1}, torch::Device(torch::kMeta)));
  CHECK(ErrorOf([&] { ModuleDevice(*norm); }) ==
        "the module's tensors are on more than one device: 'weight' on cpu, 'elsewhere' on meta");
  torch::nn::ReLU relu;
  CHECK(ErrorOf([&] { ModuleDevice(*relu); }) ==
        "the module has no parameters or buffers: no device to sync on");
}

}  // namespace
}  // namespace ember::testing
