#include "sdk/examples/fashion_common.h"

#include "sdk/examples/program_main.h"

namespace ember::examples {

void AddTrainFlags(CLI::App& app, TrainFlags& flags) {
  app.add_option("--train-dataset", flags.train_dataset, "registered training dataset")
      ->capture_default_str();
  app.add_option("--test-dataset", flags.test_dataset, "registered test dataset")
      ->capture_default_str();
  app.add_option("--epochs", flags.epochs)->check(CLI::Range(1u, 1000000u))->capture_default_str();
  app.add_option("--batch-size", flags.batch_size, "per rank")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  app.add_option("--lr", flags.lr, "Adam learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", flags.seed)->capture_default_str();
  app.add_option("--max-steps", flags.max_steps, "stop after this many optimizer steps, counted across resumes (0: all)")
      ->capture_default_str();
}

int TrainerMain(CLI::App& app, int argc, char** argv, const char* program,
                const std::function<int(const LaunchEnv& launch)>& run) {
  return ProgramMain(app, argc, argv, program, [&] {
    Result<LaunchEnv> launch = ReadLaunchEnv("fashion-mnist");
    if (!launch.ok()) throw Fatal(launch.status().message());
    return run(*launch);
  });
}

Status CheckDatasets(Client& client, const TrainFlags& flags) {
  for (const auto& [flag, dataset] : {std::pair{"--train-dataset", flags.train_dataset},
                                      std::pair{"--test-dataset", flags.test_dataset}}) {
    Result<DatasetInfo> info = client.InspectDataset(dataset);
    if (!info.ok()) {
      return Status(info.status().code(), std::string(flag) + ": " + info.status().ToString());
    }
  }
  return Status::Ok();
}

std::unique_ptr<Client> ConnectForTraining(const TrainFlags& flags) {
  Result<std::unique_ptr<Client>> connected = Client::Connect();
  if (!connected.ok()) throw Fatal(connected.status().ToString());
  std::unique_ptr<Client> client = std::move(connected).value();
  const Status datasets = CheckDatasets(*client, flags);
  if (!datasets.ok()) throw Fatal(datasets.message());
  return client;
}

void FinalBarrier(Client& client, const std::string& job, const std::string& program,
                  int world_size, std::chrono::milliseconds timeout) {
  const Status done =
      client.Barrier(job, program + ".done", static_cast<uint32_t>(world_size), timeout);
  if (!done.ok()) throw Fatal("final barrier: " + done.ToString());
}

StreamOptions TrainStream(const TrainFlags& flags, const std::string& job, int rank,
                          int world_size) {
  StreamOptions options;
  options.job = job;
  options.dataset = flags.train_dataset;
  options.batch_size = flags.batch_size;
  options.seed = flags.seed;
  options.rank = static_cast<uint32_t>(rank);
  options.world_size = static_cast<uint32_t>(world_size);
  options.epochs = flags.epochs;
  return options;
}

std::pair<torch::Tensor, torch::Tensor> FashionBatchInputs(const Batch& batch) {
  torch::Tensor x = FashionInputs(batch.at("image"));
  torch::Tensor y = batch.at("label").to(torch::kInt64).reshape({-1});
  TORCH_CHECK(y.size(0) == x.size(0), "batch has ", x.size(0), " images but ", y.size(0),
              " labels");
  return {x, y};
}

double FashionTestAccuracy(Client& client, FashionCnn& net, const std::string& job,
                           const TrainFlags& flags, const torch::Device& device) {
  StreamOptions options;
  options.job = job + ".eval";
  options.dataset = flags.test_dataset;
  // The training batch size: a larger evaluation batch would make evaluation, not
  // training, the run's memory peak (batch 1000 took 494 MiB of rank 0's 737).
  options.batch_size = flags.batch_size;
  options.seed = flags.seed;
  options.rank = 0;
  options.world_size = 1;
  options.epochs = 1;
  options.shuffle = false;
  Loader loader(client, options);
  torch::NoGradGuard no_grad;
  net->eval();
  torch::Tensor correct =
      torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  int64_t total = 0;
  while (auto batch = loader.Next()) {
    auto [x, y] = FashionBatchInputs(*batch);
    correct += net->forward(x.to(device)).argmax(1).eq(y.to(device)).sum();
    total += y.size(0);
  }
  TORCH_CHECK(total > 0, "test dataset '", flags.test_dataset, "' gave no samples");
  return static_cast<double>(correct.item<int64_t>()) / static_cast<double>(total);
}

}  // namespace ember::examples
