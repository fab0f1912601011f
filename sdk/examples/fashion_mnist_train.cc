// Data-parallel training of a small CNN on Fashion-MNIST, reading batches through emberd.
//
// One process per rank, started by ember-run (which sets EMBER_RANK, EMBER_WORLD_SIZE,
// EMBER_JOB and EMBER_SOCKET) or by hand; without them it is rank 0 of 1 in job
// "fashion-mnist". Gradients are averaged over the ranks through shared memory from the
// daemon (--collectives shm, the default) or with Gloo bootstrapped through the daemon
// (--collectives gloo). Rank 0 then evaluates on the test split and prints
//   result: test_accuracy=0.9012 train_seconds=123.45 ranks=2
// Exit codes: 0 done, 1 an error (on stderr), 3 --check-sync found ranks out of sync.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "ember/client.h"
#include "ember/launch_env.h"
#include "ember/loader.h"
#include "ember/make_communicator.h"
#include "ember/model_sync.h"
#include "sdk/examples/fashion_cnn.h"
#include "sdk/examples/fashion_common.h"
#include "sdk/examples/program_main.h"
#include "sdk/examples/heap_tuning.h"

namespace {

using ember::examples::Fatal;
using ember::examples::Seconds;

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kSyncTimeout = std::chrono::seconds(300);

struct Flags {
  ember::examples::TrainFlags train;
  int threads = 1;
  bool check_sync = false;
  std::string collectives = "shm";
};

int Run(const Flags& all_flags) {
  const ember::examples::TrainFlags& flags = all_flags.train;
  ember::Result<ember::LaunchEnv> launch = ember::ReadLaunchEnv("fashion-mnist");
  if (!launch.ok()) throw Fatal(launch.status().message());
  const int rank = launch->rank;
  const int world_size = launch->world_size;
  const std::string job = launch->job;
  ember::examples::KeepStepBuffersInHeap();
  torch::set_num_threads(all_flags.threads);
  torch::manual_seed(flags.seed);

  std::unique_ptr<ember::Client> client = ember::examples::ConnectForTraining(flags);

  // The stream first: emberd loads the dataset and fills the ring while the model and
  // the communicator are set up.
  std::optional<ember::Loader> loader;
  loader.emplace(*client, ember::examples::TrainStream(flags, job, rank, world_size));

  ember::examples::FashionCnn net;
  ember::ModelSync sync(
      *net, ember::MakeCommunicator(*client, job, rank, world_size, ember::ModuleDevice(*net),
                                    {.timeout = kSyncTimeout,
                                     .cpu = all_flags.collectives == "gloo"
                                                ? ember::CpuCollectives::kGloo
                                                : ember::CpuCollectives::kSharedMemory}));
  sync.BroadcastParameters();
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(flags.lr));

  const Clock::time_point train_start = Clock::now();
  uint64_t step = 0;
  bool step_limit_reached = false;
  for (uint32_t epoch = 0; epoch < flags.epochs && !step_limit_reached; ++epoch) {
    const Clock::time_point epoch_start = Clock::now();
    const std::chrono::nanoseconds wait_before = loader->reader().wait_time();
    double loss_sum = 0;
    uint64_t epoch_steps = 0;
    std::chrono::nanoseconds sync_time{0};
    net->train();
    while (auto batch = loader->Next()) {
      auto [x, y] = ember::examples::FashionBatchInputs(*batch);
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      loss.backward();
      const Clock::time_point sync_start = Clock::now();
      sync.AverageGradients();
      sync_time += Clock::now() - sync_start;
      optimizer.step();
      ++step;
      ++epoch_steps;
      loss_sum += loss.item<double>();
      if (all_flags.check_sync && !sync.MatchesRoot()) {
        std::fprintf(stderr,
                     "fashion_mnist_train (rank %d): parameters differ from rank 0's after "
                     "step %llu\n",
                     rank, static_cast<unsigned long long>(step));
        return 3;
      }
      if (flags.max_steps != 0 && step >= flags.max_steps) {
        step_limit_reached = true;
        break;
      }
    }
    if (rank == 0) {
      std::printf(
          "epoch %u/%u loss=%.4f steps=%llu seconds=%.2f loader_wait_seconds=%.3f "
          "sync_seconds=%.3f\n",
          epoch + 1, flags.epochs, epoch_steps ? loss_sum / epoch_steps : 0.0,
          static_cast<unsigned long long>(epoch_steps), Seconds(Clock::now() - epoch_start),
          Seconds(loader->reader().wait_time() - wait_before), Seconds(sync_time));
      std::fflush(stdout);
    }
  }
  const double train_seconds = Seconds(Clock::now() - train_start);
  loader.reset();

  if (rank == 0) {
    const double accuracy =
        ember::examples::FashionTestAccuracy(*client, net, job, flags, torch::kCPU);
    std::printf("result: test_accuracy=%.4f train_seconds=%.2f ranks=%d\n", accuracy,
                train_seconds, world_size);
    std::fflush(stdout);
  }
  ember::examples::FinalBarrier(*client, job, "fashion_mnist_train", world_size, kSyncTimeout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Data-parallel Fashion-MNIST training with batches served by emberd"};
  Flags flags;
  ember::examples::AddTrainFlags(app, flags.train);
  app.add_option("--threads", flags.threads, "torch intra-op threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--collectives", flags.collectives,
                 "gradient all-reduce: shm (shared memory, ranks on one node) or gloo")
      ->check(CLI::IsMember({"shm", "gloo"}))
      ->capture_default_str();
  app.add_flag("--check-sync", flags.check_sync,
               "after every step, check that all ranks hold identical parameters");
  return ember::examples::ProgramMain(app, argc, argv, "fashion_mnist_train",
                                      [&] { return Run(flags); });
}
