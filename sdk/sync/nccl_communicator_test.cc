#include "ember/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/types.h>

#include "sdk/sync/error_of_testing.h"

namespace ember {
namespace {

using sdk::ErrorOf;
using std::chrono::milliseconds;

// A CUDA tensor view of `data` made without ATen's CUDA library (absent from a CPU
// LibTorch): the device is given, so nothing asks CUDA which device `data` is on.
torch::Tensor CudaView(void* data, int64_t count, torch::ScalarType type) {
  return at::for_blob(data, {count})
      .options(torch::TensorOptions().dtype(type).device(torch::kCUDA, 0))
      .target_device(torch::Device(torch::kCUDA, 0))
      .make_tensor();
}

TEST_CASE("arguments are checked before CUDA is touched") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  CHECK(ErrorOf([&] { MakeNcclCommunicator(store, 1, 1, 0, milliseconds(1000)); })
            .find("nccl communicator 'default' (rank 1 of 1): rank is outside the world") !=
        std::string::npos);
  CHECK(ErrorOf([&] { MakeNcclCommunicator(store, 0, 1, -1, milliseconds(1000)); })
            .find("bad cuda device -1") != std::string::npos);
}

TEST_CASE("ranks started with different world sizes fail before NCCL starts, naming both") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors = sdk::ErrorsOfThreads(2, [&](int rank) {
    MakeNcclCommunicator(store, rank, /*world_size=*/2 + rank, 0, milliseconds(30000), "w");
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(errors[0] + "\n" + errors[1]);
  CHECK(errors[0].find("nccl init (group 'w', rank 0 of 2, cuda device 0): checking that every "
                       "rank has the same world size: rank 1 was started with world size 3, "
                       "this rank with 2") != std::string::npos);
  CHECK(errors[1].find("rank 0 was started with world size 2, this rank with 3") !=
        std::string::npos);
  CHECK(seconds < 10);  // far from the 30 s timeout
}

TEST_CASE("without a GPU, creating a communicator fails with the CUDA error") {
  if (CudaDeviceAvailable()) {
    WARN("a CUDA device is present: the no-GPU error path is not exercised");
    return;
  }
  std::string error = ErrorOf([] {
    MakeNcclCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 1, 0, milliseconds(1000));
  });
  INFO(error);
  CHECK(error.find("nccl init (group 'default', rank 0 of 1, cuda device 0): cudaSetDevice(0): ") !=
        std::string::npos);
  // The GPU test's tensor views work on this (CPU) LibTorch build too.
  float host[4] = {};
  torch::Tensor view = CudaView(host, 4, torch::kFloat);
  CHECK(view.is_cuda());
  CHECK(view.data_ptr() == static_cast<void*>(host));
}

TEST_CASE("a one-rank all-reduce and broadcast on a GPU buffer") {
  if (!CudaDeviceAvailable()) {
    WARN("SKIP: no CUDA device visible; the NCCL all-reduce test did not run");
    return;
  }
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f};
  void* device_data = nullptr;
  REQUIRE(cudaMalloc(&device_data, values.size() * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(device_data, values.data(), values.size() * sizeof(float),
                     cudaMemcpyHostToDevice) == cudaSuccess);
  {
    auto comm = MakeNcclCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 1, 0,
                                     milliseconds(30000), "test");
    CHECK(comm->rank() == 0);
    CHECK(comm->world_size() == 1);
    std::vector<torch::Tensor> tensors = {CudaView(device_data, 4, torch::kFloat)};
    comm->AllReduceSum(tensors);
    comm->Broadcast(tensors, 0);
    std::shared_ptr<PendingCollective> pending = comm->AllReduceSumAsync(tensors);
    pending->Wait();
    pending->Wait();

    std::vector<torch::Tensor> on_host = {torch::zeros({4})};
    CHECK(ErrorOf([&] { comm->AllReduceSum(on_host); }).find("expected cuda:0") !=
          std::string::npos);
  }
  std::vector<float> back(values.size());
  REQUIRE(cudaMemcpy(back.data(), device_data, back.size() * sizeof(float),
                     cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == values);
  cudaFree(device_data);
}

}  // namespace
}  // namespace ember
