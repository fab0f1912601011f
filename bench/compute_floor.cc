// The compute floor of the example trainer (issue 4's end-to-end benchmark): the same
// model (sdk/examples/fashion_cnn), optimizer (Adam), batch size and number of steps as
// one rank of sdk/examples/fashion_mnist_train, on Fashion-MNIST already in memory, in
// one single-threaded process with no Ember and no gradient sync. Whatever the trainer
// takes beyond this is the cost of loading and synchronization.
//
//   compute_floor --data /usr/share/datasets/fashion-mnist --steps 938 --batch-size 64
// prints
//   floor: steps=938 batch_size=64 threads=1 seconds=61.23 ms_per_step=65.28
// With --device cuda (a CUDA LibTorch: the CUDA configuration, tools/check-cuda) the whole
// split sits in GPU memory and batches are gathered there: the floor of
// sdk/examples/fashion_mnist_train_cuda.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "common/env.h"
#include "daemon/data/idx.h"
#include "sdk/examples/fashion_cnn.h"
#include "sdk/examples/heap_tuning.h"
#include "sdk/examples/program_main.h"

namespace {

struct Flags {
  std::string data = "/usr/share/datasets/fashion-mnist";
  uint64_t steps = 938;
  int64_t batch_size = 64;
  double lr = 1e-3;
  uint64_t seed = 0;
  int threads = 1;
  std::string device = "cpu";
};

// The train split as two in-memory tensors: images uint8 [N, 28, 28], labels int64 [N].
std::pair<torch::Tensor, torch::Tensor> LoadTrainSplit(const std::string& dir) {
  std::unique_ptr<ember::Env> env = ember::NewPosixEnv();
  ember::daemon::DatasetSpec spec;
  spec.name = "fmnist-train";
  spec.format = "idx";
  spec.path = dir;
  spec.split = "train";
  auto source = ember::daemon::LoadIdx(*env, spec);
  if (!source.ok()) throw std::runtime_error(source.status().ToString());
  const auto& info = (*source)->info();
  const int64_t count = static_cast<int64_t>(info.count);
  torch::Tensor images = torch::empty({count, 28, 28}, torch::kUInt8);
  torch::Tensor labels = torch::empty({count}, torch::kUInt8);
  for (int64_t i = 0; i < count; ++i) {
    void* dsts[2] = {images[i].data_ptr(), labels.data_ptr<uint8_t>() + i};
    ember::Status status = (*source)->ReadSample(static_cast<uint64_t>(i), {}, dsts);
    if (!status.ok()) throw std::runtime_error(status.ToString());
  }
  return {images, labels.to(torch::kInt64)};
}

int Run(const Flags& flags) {
  ember::examples::KeepStepBuffersInHeap();  // as the trainer does
  torch::set_num_threads(flags.threads);
  torch::manual_seed(flags.seed);
  const torch::Device device(flags.device);
  auto [images, labels] = LoadTrainSplit(flags.data);
  images = images.to(device);
  labels = labels.to(device);
  const int64_t count = images.size(0);

  ember::examples::FashionCnn net;
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(flags.lr));
  net->train();

  // Batches are gathered from a shuffled order, as the trainer's come from a shuffled
  // epoch; the gather is part of the floor (it is the cheapest possible loader).
  // On a GPU the order is drawn there: copying each step's index from host memory would
  // make every step wait for the GPU, slowing the floor below what it can do.
  std::mt19937_64 random(flags.seed);
  std::vector<int64_t> order(count);
  torch::Tensor device_order;
  size_t next = order.size();
  // Summed on the device: reading the loss every step would wait for a GPU.
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().device(device));
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t step = 0; step < flags.steps; ++step) {
    if (next + flags.batch_size > order.size()) {
      if (device.is_cpu()) {
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), random);
      } else {
        device_order = torch::randperm(count, torch::TensorOptions(torch::kInt64).device(device));
      }
      next = 0;
    }
    torch::Tensor index =
        device.is_cpu()
            ? torch::from_blob(order.data() + next, {flags.batch_size}, torch::kInt64)
            : device_order.narrow(0, static_cast<int64_t>(next), flags.batch_size);
    next += flags.batch_size;
    torch::Tensor x = ember::examples::FashionInputs(images.index_select(0, index));
    torch::Tensor y = labels.index_select(0, index);
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    optimizer.step();
    loss_sum += loss.detach();
  }
  const double mean_loss = flags.steps ? loss_sum.item<double>() / flags.steps : 0.0;  // waits
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("floor: steps=%llu batch_size=%lld threads=%d device=%s seconds=%.2f "
              "ms_per_step=%.2f mean_loss=%.4f\n",
              static_cast<unsigned long long>(flags.steps),
              static_cast<long long>(flags.batch_size), flags.threads, flags.device.c_str(),
              seconds, flags.steps ? 1000.0 * seconds / flags.steps : 0.0, mean_loss);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The example trainer's compute floor: same model and steps, data in memory, "
               "no Ember, no sync"};
  Flags flags;
  app.add_option("--data", flags.data, "directory with the Fashion-MNIST IDX files")
      ->capture_default_str();
  app.add_option("--steps", flags.steps, "optimizer steps")->capture_default_str();
  app.add_option("--batch-size", flags.batch_size)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--lr", flags.lr)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", flags.seed)->capture_default_str();
  app.add_option("--threads", flags.threads, "torch intra-op threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--device", flags.device, "cpu, or cuda / cuda:N with a CUDA LibTorch")
      ->capture_default_str();
  return ember::examples::ProgramMain(app, argc, argv, "compute_floor", [&] { return Run(flags); });
}
