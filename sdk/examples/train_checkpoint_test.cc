#include "sdk/examples/train_checkpoint.h"

#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <catch2/catch.hpp>

#include "common/temp_dir_testing.h"

namespace ember::examples {
namespace {

// A model and its optimizer after one step, so that the optimizer has state.
struct Trained {
  explicit Trained(double weight) : net(torch::nn::LinearOptions(3, 2)), adam(net->parameters()) {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : net->parameters()) p.fill_(weight);
  }
  void Step() {
    adam.zero_grad();
    net->forward(torch::ones({4, 3})).sum().backward();
    adam.step();
  }
  torch::nn::Linear net;
  torch::optim::Adam adam;
};

TEST_CASE("a checkpoint restores model, optimizer and counters") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("checkpoint/round_trip") + "/ckpt";  // created
  Trained written(0.5);
  written.Step();
  TrainCheckpoint checkpoint;
  checkpoint.loader = LoaderState{0xabcdef, 7, 1, 640};
  checkpoint.step_in_epoch = 20;
  checkpoint.total_steps = 69;
  checkpoint.world_size = 2;
  checkpoint.batch_size = 16;
  REQUIRE(SaveCheckpoint(*env, dir, *written.net, written.adam, checkpoint).ok());

  Trained read(-1.0);
  Result<std::optional<TrainCheckpoint>> loaded = LoadCheckpoint(*env, dir, *read.net, read.adam);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->has_value());
  const TrainCheckpoint& got = **loaded;
  CHECK(got.loader == checkpoint.loader);
  CHECK(got.step_in_epoch == 20);
  CHECK(got.total_steps == 69);
  CHECK(got.world_size == 2);
  CHECK(got.batch_size == 16);
  CHECK(torch::equal(read.net->weight, written.net->weight));
  CHECK(torch::equal(read.net->bias, written.net->bias));
  // The same optimizer state: the next step lands on the same parameters.
  written.Step();
  read.Step();
  CHECK(torch::equal(read.net->weight, written.net->weight));
}

TEST_CASE("no checkpoint yet is nullopt; a newer one replaces the old") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("checkpoint/replace");
  Trained model(0.5);
  Result<std::optional<TrainCheckpoint>> none = LoadCheckpoint(*env, dir, *model.net, model.adam);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  TrainCheckpoint checkpoint;
  checkpoint.total_steps = 1;
  REQUIRE(SaveCheckpoint(*env, dir, *model.net, model.adam, checkpoint).ok());
  checkpoint.total_steps = 2;
  REQUIRE(SaveCheckpoint(*env, dir, *model.net, model.adam, checkpoint).ok());
  Result<std::vector<std::string>> names = env->ListDir(dir);
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"checkpoint.pt"});
  Result<std::optional<TrainCheckpoint>> loaded = LoadCheckpoint(*env, dir, *model.net, model.adam);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->has_value());
  CHECK((*loaded)->total_steps == 2);
}

TEST_CASE("a file that is not a checkpoint is kDataLoss naming it") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("checkpoint/garbage");
  WriteTestFile(CheckpointPath(dir), "not a zip archive");
  Trained model(0.5);
  Result<std::optional<TrainCheckpoint>> loaded = LoadCheckpoint(*env, dir, *model.net, model.adam);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(loaded.status().message(), Catch::Contains(dir + "/checkpoint.pt: not a checkpoint"));
}

TEST_CASE("the temporary files of a killed writer are removed, the checkpoint kept") {
  auto env = NewPosixEnv();
  const std::string dir = FreshTestDir("checkpoint/leftovers");
  WriteTestFile(dir + "/checkpoint.pt", "kept");
  WriteTestFile(dir + "/checkpoint.pt.tmp.123.0", "half");
  WriteTestFile(dir + "/other", "kept");
  REQUIRE(RemoveCheckpointLeftovers(*env, dir).ok());
  Result<std::vector<std::string>> names = env->ListDir(dir);
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"checkpoint.pt", "other"});
  CHECK(RemoveCheckpointLeftovers(*env, dir + "/missing").ok());
}

}  // namespace
}  // namespace ember::examples
