// One rank of a data-parallel training loop on synthetic data, to time a training step
// with Ember's gradient sync (`bench/compare sync_bench` compares it with PyTorch DDP,
// bench/ddp_baseline.py).
//
//   ember-run --nproc 2 -- bazel-bin/bench/sync_bench --model resnet18 --sync data_parallel
//
// Every rank makes one fixed random batch (seeded by its rank) once and trains on it
// again and again: no loader, no data wait. A step is zero_grad, forward, cross-entropy,
// backward, the sync and the optimizer step. --sync model_sync calls
// ModelSync::AverageGradients after backward (one coalesced all-reduce);
// data_parallel wraps the model in ember::DataParallel (bucketed all-reduces launched
// from gradient hooks during backward, waited at its end); barrier keeps the ranks in
// lockstep without exchanging gradients (a one-float all-reduce where ModelSync would
// sync), which separates what waiting for each other costs from what moving gradients
// costs; none trains each rank on its own (impl=ember_none, no emberd needed). The sync
// runs through shared memory from emberd (--collectives shm, the default) or on Gloo
// (--collectives gloo; impl gets a "_gloo" suffix), bootstrapped through emberd (ranks
// from EMBER_RANK, EMBER_WORLD_SIZE, EMBER_JOB, EMBER_SOCKET, as ember-run sets them).
//
// After --warmup steps, --steps steps are timed on rank 0, which prints
//   sync_bench: impl=ember_data_parallel model=resnet18 params=11173962 ranks=2 batch=16
//     steps=10 step_ms_mean=... step_ms_median=... forward_ms=... backward_ms=...
//     sync_ms=... optimizer_ms=... cpu_ms=... page_faults=...
// (one line). Phases are means; backward_ms includes DataParallel's all-reduces, sync_ms
// is ModelSync::AverageGradients (0 otherwise); cpu_ms and page_faults are rank 0's
// process CPU time (all threads, user + system) and minor page faults per timed step,
// which other load on the machine disturbs less than wall time. Exit codes: 0 done,
// 1 an error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "bench/json_lines.h"
#include "bench/models/resnet18.h"
#include "bench/stats.h"
#include "ember/client.h"
#include "ember/data_parallel.h"
#include "ember/launch_env.h"
#include "ember/make_communicator.h"
#include "ember/model_sync.h"
#include "sdk/examples/fashion_cnn.h"
#include "sdk/examples/program_main.h"

namespace {

using ember::bench::Mean;
using ember::bench::Median;
using ember::examples::Fatal;

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kSyncTimeout = std::chrono::seconds(300);
constexpr int64_t kClasses = 10;

struct Flags {
  std::string model = "cnn";
  std::string sync = "model_sync";
  uint32_t batch_size = 64;
  uint32_t steps = 50;
  uint32_t warmup = 5;
  int threads = 1;
  std::string optimizer = "adam";
  double lr = 1e-3;
  double bucket_mb = 25;
  uint64_t seed = 0;
  std::string json;
  std::string collectives = "shm";
};

// The model as a module and its forward pass.
struct Model {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::vector<int64_t> input_shape;  // of one sample
};

Model MakeModel(const std::string& name) {
  if (name == "cnn") {
    ember::examples::FashionCnn net;
    return {net.ptr(), [net](const torch::Tensor& x) mutable { return net->forward(x); },
            {1, 28, 28}};
  }
  ember::bench::ResNet18 net(kClasses);
  return {net.ptr(), [net](const torch::Tensor& x) mutable { return net->forward(x); },
          {3, 32, 32}};
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const Flags& flags,
                                                       torch::nn::Module& module) {
  if (flags.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        module.parameters(), torch::optim::SGDOptions(flags.lr).momentum(0.9));
  }
  return std::make_unique<torch::optim::Adam>(module.parameters(),
                                              torch::optim::AdamOptions(flags.lr));
}

double Ms(Clock::duration duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

// CPU time (user + system, all threads) and minor page faults of this process so far.
struct Usage {
  double cpu_ms = 0;
  double minor_faults = 0;
};

Usage ProcessUsage() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return {ms(usage.ru_utime) + ms(usage.ru_stime), static_cast<double>(usage.ru_minflt)};
}

int Run(const Flags& flags) {
  ember::Result<ember::LaunchEnv> launch = ember::ReadLaunchEnv("sync-bench");
  if (!launch.ok()) throw Fatal(launch.status().message());
  const int rank = launch->rank;
  const int world_size = launch->world_size;
  const std::string job = launch->job;

  double load_before = 0;
  getloadavg(&load_before, 1);
  torch::set_num_threads(flags.threads);
  torch::manual_seed(flags.seed + static_cast<uint64_t>(rank));

  Model model = MakeModel(flags.model);
  torch::nn::Module& module = *model.module;
  int64_t params = 0;
  for (const torch::Tensor& parameter : module.parameters()) params += parameter.numel();

  std::vector<int64_t> shape = {flags.batch_size};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  const torch::Tensor x = torch::randn(shape);
  const torch::Tensor y = torch::randint(kClasses, {flags.batch_size}, torch::kInt64);

  std::unique_ptr<ember::Client> client;
  std::optional<ember::ModelSync> model_sync;
  std::unique_ptr<ember::DataParallel> data_parallel;
  std::shared_ptr<ember::Communicator> barrier;
  if (flags.sync != "none") {
    ember::Result<std::unique_ptr<ember::Client>> connected = ember::Client::Connect();
    if (!connected.ok()) throw Fatal(connected.status().ToString());
    client = std::move(connected).value();
    std::shared_ptr<ember::Communicator> comm = ember::MakeCommunicator(
        *client, job, rank, world_size, torch::kCPU,
        {.timeout = kSyncTimeout,
         .cpu = flags.collectives == "gloo" ? ember::CpuCollectives::kGloo
                                            : ember::CpuCollectives::kSharedMemory});
    if (flags.sync == "barrier") {
      barrier = comm;
    } else if (flags.sync == "model_sync") {
      model_sync.emplace(module, comm);
      model_sync->BroadcastParameters();
    } else {
      ember::DataParallelOptions options;
      options.bucket_bytes = static_cast<int64_t>(flags.bucket_mb * 1024 * 1024);
      data_parallel = std::make_unique<ember::DataParallel>(module, comm, options);
    }
  }
  std::unique_ptr<torch::optim::Optimizer> optimizer = MakeOptimizer(flags, module);

  std::vector<double> step_ms, forward_ms, backward_ms, sync_ms, optimizer_ms;
  Usage usage_before;
  module.train();
  for (uint32_t step = 0; step < flags.warmup + flags.steps; ++step) {
    if (step == flags.warmup) usage_before = ProcessUsage();
    const Clock::time_point start = Clock::now();
    optimizer->zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model.forward(x), y);
    const Clock::time_point forwarded = Clock::now();
    loss.backward();
    const Clock::time_point backwarded = Clock::now();
    if (model_sync) model_sync->AverageGradients();
    if (barrier) {
      std::vector<torch::Tensor> token = {torch::ones({1})};
      barrier->AllReduceSum(token);
    }
    const Clock::time_point synced = Clock::now();
    optimizer->step();
    const Clock::time_point end = Clock::now();
    if (step < flags.warmup) continue;
    step_ms.push_back(Ms(end - start));
    forward_ms.push_back(Ms(forwarded - start));
    backward_ms.push_back(Ms(backwarded - forwarded));
    sync_ms.push_back(Ms(synced - backwarded));
    optimizer_ms.push_back(Ms(end - synced));
  }
  const Usage usage_after = ProcessUsage();
  const double cpu_ms = (usage_after.cpu_ms - usage_before.cpu_ms) / flags.steps;
  const double faults = (usage_after.minor_faults - usage_before.minor_faults) / flags.steps;

  if (client != nullptr) {
    // The ranks leave together, so that no rank's Gloo sees its peer vanish mid-step.
    ember::Status done = client->Barrier(job, "sync_bench.done",
                                         static_cast<uint32_t>(world_size), kSyncTimeout);
    if (!done.ok()) throw Fatal("final barrier: " + done.ToString());
  }
  if (rank != 0) return 0;

  const std::string impl = "ember_" + flags.sync +
                           (flags.sync != "none" && flags.collectives == "gloo" ? "_gloo" : "");
  char line[512];
  std::snprintf(line, sizeof(line),
                "impl=%s model=%s params=%lld ranks=%d batch=%u steps=%u step_ms_mean=%.2f "
                "step_ms_median=%.2f forward_ms=%.2f backward_ms=%.2f sync_ms=%.2f "
                "optimizer_ms=%.2f cpu_ms=%.1f page_faults=%.0f",
                impl.c_str(), flags.model.c_str(), static_cast<long long>(params), world_size,
                flags.batch_size, flags.steps, Mean(step_ms), Median(step_ms), Mean(forward_ms),
                Mean(backward_ms), Mean(sync_ms), Mean(optimizer_ms), cpu_ms, faults);
  if (data_parallel) {
    const ember::DataParallelStats stats = data_parallel->stats();
    std::printf("rank 0: %zu buckets, %lld launched during backward, %lld at its end\n",
                data_parallel->BucketLayout().size(),
                static_cast<long long>(stats.buckets_launched_during_backward),
                static_cast<long long>(stats.buckets_launched_at_end));
  }
  std::printf("sync_bench: %s\n", line);
  std::fflush(stdout);

  ember::bench::JsonLines(flags.json, "sync_bench")
      .Append(ember::bench::StringPrintf(
          "\"cpus\": %ld, "
          "\"loadavg_1min_before\": %.2f, \"torch\": \"%s\", \"impl\": \"%s\", "
          "\"model\": \"%s\", \"params\": %lld, \"ranks\": %d, \"batch\": %u, "
          "\"steps\": %u, \"warmup\": %u, \"threads\": %d, \"optimizer\": "
          "\"%s\", "
          "\"step_ms_mean\": %.2f, \"step_ms_median\": %.2f, \"forward_ms\": "
          "%.2f, "
          "\"backward_ms\": %.2f, \"sync_ms\": %.2f, \"optimizer_ms\": %.2f, "
          "\"cpu_ms\": %.1f, \"page_faults\": %.0f",
          sysconf(_SC_NPROCESSORS_ONLN), load_before, TORCH_VERSION, impl.c_str(),
          flags.model.c_str(), static_cast<long long>(params), world_size, flags.batch_size,
          flags.steps, flags.warmup, flags.threads, flags.optimizer.c_str(), Mean(step_ms),
          Median(step_ms), Mean(forward_ms), Mean(backward_ms), Mean(sync_ms), Mean(optimizer_ms),
          cpu_ms, faults));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One rank of a data-parallel training step benchmark on synthetic data"};
  Flags flags;
  app.add_option("--model", flags.model, "cnn (the Fashion-MNIST example CNN) or resnet18")
      ->check(CLI::IsMember({"cnn", "resnet18"}))
      ->capture_default_str();
  app.add_option("--sync", flags.sync, "model_sync, data_parallel, barrier or none")
      ->check(CLI::IsMember({"model_sync", "data_parallel", "barrier", "none"}))
      ->capture_default_str();
  app.add_option("--batch-size", flags.batch_size, "per rank")
      ->check(CLI::Range(1u, 1u << 16))
      ->capture_default_str();
  app.add_option("--steps", flags.steps, "timed steps")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  app.add_option("--warmup", flags.warmup, "untimed steps first")->capture_default_str();
  app.add_option("--threads", flags.threads, "torch intra-op threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--optimizer", flags.optimizer, "adam or sgd (momentum 0.9)")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  app.add_option("--lr", flags.lr)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--bucket-mb", flags.bucket_mb, "DataParallel bucket size (MiB)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", flags.seed, "rank r uses seed + r")->capture_default_str();
  app.add_option("--collectives", flags.collectives, "shm (shared memory) or gloo")
      ->check(CLI::IsMember({"shm", "gloo"}))
      ->capture_default_str();
  app.add_option("--json", flags.json, "rank 0 appends its result as one JSON line to this file");
  return ember::examples::ProgramMain(app, argc, argv, "sync_bench", [&] { return Run(flags); });
}
