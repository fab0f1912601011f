// Data-parallel training of the example CNN on Fashion-MNIST on GPUs: batches come from
// emberd's ring straight to the GPU (ember::DeviceLoader: the registered ring, copied on a
// side stream while the previous step computes), gradients are averaged over NCCL in
// buckets overlapped with backward (ember::DataParallel), rendezvous through emberd.
// Needs the CUDA configuration (tools/check-cuda builds it).
//
// One process per GPU, started by ember-run (which sets EMBER_RANK, EMBER_WORLD_SIZE,
// EMBER_LOCAL_RANK, EMBER_JOB and EMBER_SOCKET; rank r trains on cuda:EMBER_LOCAL_RANK)
// or by hand as rank 0 of 1 on cuda:0. Rank 0 evaluates on the test split and prints
//   result: test_accuracy=0.9012 train_seconds=12.34 ranks=1 device=cuda
// Exit codes: 0 done, 1 an error (on stderr), 77 no CUDA device is visible.
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "ember/client.h"
#include "ember/data_parallel.h"
#include "ember/device_loader.h"
#include "ember/launch_env.h"
#include "ember/make_communicator.h"
#include "sdk/examples/fashion_cnn.h"
#include "sdk/examples/fashion_common.h"
#include "sdk/examples/program_main.h"

namespace {

using ember::examples::Fatal;
using ember::examples::kSyncTimeout;
using ember::examples::Seconds;

using Clock = std::chrono::steady_clock;

constexpr int kExitNoGpu = 77;

struct Flags {
  ember::examples::TrainFlags train;
  bool register_ring = true;
};

int Run(const Flags& all_flags, const ember::LaunchEnv& launch) {
  const ember::examples::TrainFlags& flags = all_flags.train;
  const int rank = launch.rank;
  const int world_size = launch.world_size;
  const std::string& job = launch.job;
  const int device_index = launch.local_rank;
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "fashion_mnist_train_cuda: SKIP: no CUDA device visible\n");
    return kExitNoGpu;
  }
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (device_index >= gpus) {
    throw Fatal("local rank " + std::to_string(device_index) + " has no GPU: " +
                std::to_string(gpus) + " visible");
  }
  const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index));
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
  torch::manual_seed(flags.seed);

  std::unique_ptr<ember::Client> client = ember::examples::ConnectForTraining(flags);

  // The stream first: emberd loads the dataset and fills the ring while the model and
  // NCCL are set up.
  std::optional<ember::DeviceLoader> loader;
  loader.emplace(*client, ember::examples::TrainStream(flags, job, rank, world_size),
                 ember::DeviceLoaderOptions{.device = device_index,
                                            .register_ring = all_flags.register_ring});

  ember::examples::FashionCnn net;
  net->to(device);
  // NCCL, since the module is on a GPU.
  ember::DataParallel ddp(*net, ember::MakeCommunicator(*client, job, rank, world_size,
                                                        ember::ModuleDevice(*net),
                                                        {.timeout = kSyncTimeout}));
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(flags.lr));

  if (rank == 0) {
    const std::string ring = loader->ring_registered()
                                 ? "registered (batches go to the GPU by DMA from the ring)"
                                 : "staged: " + loader->registration_status().ToString();
    std::printf("device cuda:%d, ranks %d, ring %s\n", device_index, world_size, ring.c_str());
    std::fflush(stdout);
  }

  const Clock::time_point train_start = Clock::now();
  uint64_t step = 0;
  bool step_limit_reached = false;
  for (uint32_t epoch = 0; epoch < flags.epochs && !step_limit_reached; ++epoch) {
    const Clock::time_point epoch_start = Clock::now();
    const std::chrono::nanoseconds wait_before = loader->reader().wait_time();
    // Summed on the device: reading the loss every step would wait for the GPU.
    torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().device(device));
    uint64_t epoch_steps = 0;
    net->train();
    while (auto batch = loader->Next()) {
      auto [x, y] = ember::examples::FashionBatchInputs(*batch);
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      loss.backward();  // DataParallel averages the gradients before this returns
      optimizer.step();
      loss_sum += loss.detach();
      ++step;
      ++epoch_steps;
      if (flags.max_steps != 0 && step >= flags.max_steps) {
        step_limit_reached = true;
        break;
      }
    }
    const double mean_loss = epoch_steps ? loss_sum.item<double>() / epoch_steps : 0.0;
    if (rank == 0) {
      std::printf("epoch %u/%u loss=%.4f steps=%llu seconds=%.2f loader_wait_seconds=%.3f\n",
                  epoch + 1, flags.epochs, mean_loss,
                  static_cast<unsigned long long>(epoch_steps),
                  Seconds(Clock::now() - epoch_start),
                  Seconds(loader->reader().wait_time() - wait_before));
      std::fflush(stdout);
    }
  }
  torch::cuda::synchronize(static_cast<int64_t>(device_index));
  const double train_seconds = Seconds(Clock::now() - train_start);
  const ember::DataParallelStats stats = ddp.stats();
  loader.reset();

  if (rank == 0) {
    const double accuracy =
        ember::examples::FashionTestAccuracy(*client, net, job, flags, device);
    std::printf(
        "result: test_accuracy=%.4f train_seconds=%.2f ranks=%d device=cuda steps=%llu "
        "buckets_during_backward=%lld buckets_at_end=%lld\n",
        accuracy, train_seconds, world_size, static_cast<unsigned long long>(step),
        static_cast<long long>(stats.buckets_launched_during_backward),
        static_cast<long long>(stats.buckets_launched_at_end));
    std::fflush(stdout);
  }
  ember::examples::FinalBarrier(*client, job, "fashion_mnist_train_cuda", world_size, kSyncTimeout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Data-parallel Fashion-MNIST training on GPUs with batches served by emberd"};
  Flags flags;
  ember::examples::AddTrainFlags(app, flags.train);
  app.add_flag("!--no-register-ring", flags.register_ring,
               "copy batches through pinned staging buffers instead of straight from the "
               "registered ring");
  return ember::examples::TrainerMain(
      app, argc, argv, "fashion_mnist_train_cuda",
      [&](const ember::LaunchEnv& launch) { return Run(flags, launch); });
}
