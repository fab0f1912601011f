#include "sdk/examples/train_checkpoint.h"

#include <sstream>
#include <utility>
#include <vector>

#include <torch/serialize/archive.h>

namespace ember::examples {
namespace {

constexpr const char* kFileName = "checkpoint.pt";
constexpr const char* kFormat = "ember-example-checkpoint 1";

int64_t ReadInt(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  TORCH_CHECK(value.isInt(), "field '", key, "' is not an integer");
  TORCH_CHECK(value.toInt() >= 0, "field '", key, "' is negative: ", value.toInt());
  return value.toInt();
}

std::string ReadString(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  TORCH_CHECK(value.isString(), "field '", key, "' is not a string");
  return value.toStringRef();
}

}  // namespace

std::string CheckpointPath(const std::string& dir) { return dir + "/" + kFileName; }

Status SaveCheckpoint(Env& env, const std::string& dir, const torch::nn::Module& net,
                      const torch::optim::Optimizer& optimizer,
                      const TrainCheckpoint& checkpoint) {
  const std::string path = CheckpointPath(dir);
  std::ostringstream bytes;
  try {
    torch::serialize::OutputArchive archive;
    torch::serialize::OutputArchive model(archive.compilation_unit());
    net.save(model);
    archive.write("model", model);
    torch::serialize::OutputArchive optim(archive.compilation_unit());
    optimizer.save(optim);
    archive.write("optimizer", optim);
    archive.write("format", c10::IValue(std::string(kFormat)));
    archive.write("loader_state", c10::IValue(checkpoint.loader.ToString()));
    archive.write("step_in_epoch", c10::IValue(static_cast<int64_t>(checkpoint.step_in_epoch)));
    archive.write("total_steps", c10::IValue(static_cast<int64_t>(checkpoint.total_steps)));
    archive.write("world_size", c10::IValue(static_cast<int64_t>(checkpoint.world_size)));
    archive.write("batch_size", c10::IValue(static_cast<int64_t>(checkpoint.batch_size)));
    archive.save_to(bytes);
  } catch (const c10::Error& e) {
    return Internal(path + ": serializing the checkpoint: " + e.what_without_backtrace());
  }
  EMBER_RETURN_IF_ERROR(env.CreateDirs(dir));
  return env.WriteFileAtomic(path, bytes.str());
}

Result<std::optional<TrainCheckpoint>> LoadCheckpoint(Env& env, const std::string& dir,
                                                      torch::nn::Module& net,
                                                      torch::optim::Optimizer& optimizer) {
  const std::string path = CheckpointPath(dir);
  if (!env.FileExists(path)) return std::optional<TrainCheckpoint>();
  EMBER_ASSIGN_OR_RETURN(const std::string bytes, env.ReadFile(path));
  TrainCheckpoint checkpoint;
  std::string loader_state;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data(), bytes.size());
    const std::string format = ReadString(archive, "format");
    TORCH_CHECK(format == kFormat, "format is '", format, "', expected '", kFormat, "'");
    loader_state = ReadString(archive, "loader_state");
    checkpoint.step_in_epoch = static_cast<uint64_t>(ReadInt(archive, "step_in_epoch"));
    checkpoint.total_steps = static_cast<uint64_t>(ReadInt(archive, "total_steps"));
    checkpoint.world_size = static_cast<uint32_t>(ReadInt(archive, "world_size"));
    checkpoint.batch_size = static_cast<uint32_t>(ReadInt(archive, "batch_size"));
    torch::serialize::InputArchive model;
    archive.read("model", model);
    net.load(model);
    torch::serialize::InputArchive optim;
    archive.read("optimizer", optim);
    optimizer.load(optim);
  } catch (const c10::Error& e) {
    return DataLoss(path + ": not a checkpoint of this trainer: " + e.what_without_backtrace());
  }
  Result<LoaderState> parsed = LoaderState::Parse(loader_state);
  if (!parsed.ok()) return DataLoss(path + ": " + parsed.status().message());
  checkpoint.loader = *parsed;
  return std::optional<TrainCheckpoint>(std::move(checkpoint));
}

Status RemoveCheckpointLeftovers(Env& env, const std::string& dir) {
  if (!env.IsDirectory(dir)) return Status::Ok();
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> names, env.ListDir(dir));
  // WriteFileAtomic's temporary files are named after the file they replace.
  const std::string prefix = std::string(kFileName) + ".";
  for (const std::string& name : names)
    if (name.compare(0, prefix.size(), prefix) == 0)
      EMBER_RETURN_IF_ERROR(env.RemoveAll(dir + "/" + name));
  return Status::Ok();
}

}  // namespace ember::examples
