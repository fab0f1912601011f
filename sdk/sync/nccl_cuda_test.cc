// The NCCL backend under a CUDA LibTorch, on one GPU (CUDA configuration only; see
// tools/check-cuda): a collective is ordered after the kernels queued on the caller's
// current stream, and DataParallel and ModelSync train a CUDA module over NCCL exactly
// as one process without them does. One GPU allows one rank (NCCL puts no two ranks
// of a communicator on one device), so the all-reduce is an identity here; what these
// tests check is the CUDA path around it: hooks on autograd's device thread, buckets on
// the device, stream order, averaging and copy-back. The cases skip (with a SKIP warning)
// when no CUDA device is visible.
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>
// After LibTorch: c10/util/Logging.h defines a CHECK of its own (a fatal check Catch
// never counts or reports), and whichever header comes last decides what CHECK means.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ember/data_parallel.h"
#include "ember/model_sync.h"
#include "ember/nccl_communicator.h"

namespace ember {
namespace {

bool NoGpu() {
  if (torch::cuda::is_available()) return false;
  WARN("SKIP: no CUDA device visible; the NCCL training checks did not run");
  return true;
}

std::shared_ptr<Communicator> OneRankNccl(const std::string& name) {
  return MakeNcclCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 1, 0,
                              std::chrono::seconds(60), name);
}

// A small network with an unused parameter: Linear layers (several buckets at a small
// bucket size) and a parameter that forward never touches.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(32, 64));
    fc2 = register_module("fc2", torch::nn::Linear(64, 64));
    fc3 = register_module("fc3", torch::nn::Linear(64, 10));
    unused = register_parameter("unused", torch::ones({8}));
    // A bool buffer, as masks are: broadcast (as uint8), never summed.
    mask = register_buffer("mask", torch::rand({16}) > 0.5);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  torch::Tensor unused, mask;
};
TORCH_MODULE(Net);

// A copy of `source` on cuda:0 with the same parameter values.
Net CopyToGpu(const Net& source) {
  Net net;
  torch::NoGradGuard no_grad;
  auto from = source->parameters();
  auto to = net->parameters();
  for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  net->to(torch::Device(torch::kCUDA, 0));
  return net;
}

// The largest relative difference over all parameters of two networks.
double MaxRelativeDifference(const Net& a, const Net& b) {
  double worst = 0;
  auto pa = a->parameters();
  auto pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    const double scale = std::max(1e-12, pb[i].abs().max().item<double>());
    worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

TEST_CASE("a collective starts after the kernels queued on the caller's current stream") {
  if (NoGpu()) return;
  std::shared_ptr<Communicator> comm = OneRankNccl("stream-order");
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
  c10::cuda::CUDAStreamGuard on_side(side);
  torch::Tensor t = torch::zeros({1 << 20}, torch::Device(torch::kCUDA, 0));
  at::cuda::sleep(500'000'000);  // keeps the side stream busy for ~0.25-0.5 s
  t.fill_(3.0);
  std::vector<torch::Tensor> tensors = {t};
  comm->AllReduceSum(tensors);
  // The all-reduce waited for the sleep and the fill: the side stream has drained.
  CHECK(cudaStreamQuery(side.stream()) == cudaSuccess);
  CHECK(t.min().item<float>() == 3.0f);
  CHECK(t.max().item<float>() == 3.0f);
}

TEST_CASE("DataParallel over NCCL trains a CUDA module as one process without it does") {
  if (NoGpu()) return;
  torch::manual_seed(7);
  Net cpu_init;
  Net reference = CopyToGpu(cpu_init);
  Net replica = CopyToGpu(cpu_init);
  const torch::Device gpu(torch::kCUDA, 0);
  // Work on a side stream, as a trainer overlapping input copies might: the buckets
  // are written there and NCCL must wait for them.
  c10::cuda::CUDAStreamGuard on_side(c10::cuda::getStreamFromPool(false, 0));

  DataParallel ddp(*replica, OneRankNccl("data-parallel"), {.bucket_bytes = 8 * 1024});
  // [fc3, fc2] 19,240 bytes, [fc1] 8,448, [unused] 32: the last bucket never gets a gradient.
  CHECK(ddp.BucketLayout().size() == 3);
  torch::optim::SGD opt_reference(reference->parameters(),
                                  torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD opt_replica(replica->parameters(),
                                torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 20; ++step) {
    torch::Tensor x = torch::randn({48, 32}, gpu);
    torch::Tensor y =
        torch::randint(0, 10, {48}, torch::TensorOptions().device(gpu).dtype(torch::kLong));
    auto loss = [&](Net& net, int64_t from, int64_t count) {
      return torch::nn::functional::cross_entropy(net->forward(x.narrow(0, from, count)),
                                                  y.narrow(0, from, count));
    };
    opt_reference.zero_grad();
    opt_replica.zero_grad();
    if (step % 4 == 3) {
      // Gradient accumulation: the first half without sync, the second half synced.
      (loss(reference, 0, 24) / 2).backward();
      (loss(reference, 24, 24) / 2).backward();
      {
        auto no_sync = ddp.NoSync();
        (loss(replica, 0, 24) / 2).backward();
      }
      (loss(replica, 24, 24) / 2).backward();
    } else {
      loss(reference, 0, 48).backward();
      loss(replica, 0, 48).backward();
    }
    opt_reference.step();
    opt_replica.step();
  }
  const DataParallelStats stats = ddp.stats();
  CHECK(stats.synced_backward_passes == 20);
  CHECK(stats.buckets_launched_during_backward > 0);
  CHECK_FALSE(replica->unused.grad().defined());
  const double difference = MaxRelativeDifference(replica, reference);
  INFO("largest relative parameter difference after 20 steps: " << difference);
  CHECK(difference <= 1e-5);
  CHECK(replica->parameters()[0].is_cuda());
  // Training moved the parameters: the comparison is not between two untouched copies.
  CHECK(MaxRelativeDifference(replica, CopyToGpu(cpu_init)) > 1e-3);
}

TEST_CASE("ModelSync over NCCL broadcasts, averages and checks a CUDA module") {
  if (NoGpu()) return;
  torch::manual_seed(11);
  Net cpu_init;
  Net net = CopyToGpu(cpu_init);
  ModelSync sync(*net, OneRankNccl("model-sync"));
  sync.BroadcastParameters();
  CHECK(MaxRelativeDifference(net, CopyToGpu(cpu_init)) == 0);
  torch::Tensor x = torch::randn({16, 32}, torch::Device(torch::kCUDA, 0));
  net->forward(x).sum().backward();
  const torch::Tensor before = net->fc1->weight.grad().clone();
  sync.AverageGradients();
  CHECK(torch::equal(net->fc1->weight.grad(), before));
  CHECK_FALSE(net->unused.grad().defined());
  CHECK(sync.MatchesRoot());
}

}  // namespace
}  // namespace ember
