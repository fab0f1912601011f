// What both example trainers (fashion_mnist_train on CPUs, fashion_mnist_train_cuda on
// GPUs) share: their main(), their common flags, the dataset check, the training stream,
// a batch as model inputs, the test-split accuracy, and small helpers.
#ifndef EMBER_SDK_EXAMPLES_FASHION_COMMON_H_
#define EMBER_SDK_EXAMPLES_FASHION_COMMON_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "ember/client.h"
#include "ember/launch_env.h"
#include "ember/loader.h"
#include "ember/status.h"
#include "sdk/examples/fashion_cnn.h"

namespace ember::examples {

inline double Seconds(std::chrono::nanoseconds duration) {
  return std::chrono::duration<double>(duration).count();
}

// How long a rank waits for its peers: the communicator's timeout and the final barrier's.
inline constexpr std::chrono::milliseconds kSyncTimeout = std::chrono::seconds(300);

struct TrainFlags {
  std::string train_dataset = "fmnist-train";
  std::string test_dataset = "fmnist-test";
  uint32_t epochs = 2;
  uint32_t batch_size = 64;  // per rank
  double lr = 1e-3;          // Adam
  uint64_t seed = 0;
  uint64_t max_steps = 0;  // 0: all
};

// Adds --train-dataset, --test-dataset, --epochs, --batch-size, --lr, --seed, --max-steps.
void AddTrainFlags(CLI::App& app, TrainFlags& flags);

// The main() of a trainer whose flags (AddTrainFlags' and its own) are in `app`: parses
// them, reads this rank's place in its job (ReadLaunchEnv: its launcher's variables, or
// rank 0 of 1 in job "fashion-mnist") and returns run(launch)'s exit code. As
// ProgramMain: --help exits 0 and a bad flag 1; a malformed launch environment or an
// exception out of run() is printed as "<program>: <message>" and exits 1.
int TrainerMain(CLI::App& app, int argc, char** argv, const char* program,
                const std::function<int(const LaunchEnv& launch)>& run);

// Both splits are checked up front, so that a bad name fails every rank before training
// rather than rank 0 alone after it. The error names the flag and the daemon's reason.
Status CheckDatasets(Client& client, const TrainFlags& flags);

// A client of emberd (at $EMBER_SOCKET or the default socket) that has passed
// CheckDatasets. Throws Fatal with the reason if either fails.
std::unique_ptr<Client> ConnectForTraining(const TrainFlags& flags);

// Waits (up to `timeout`) until all `world_size` ranks of `job` have reached the barrier
// "<program>.done", so that no rank leaves while a peer still needs it. Throws Fatal.
void FinalBarrier(Client& client, const std::string& job, const std::string& program,
                  int world_size, std::chrono::milliseconds timeout);

// This rank's shuffled training stream of `job`.
StreamOptions TrainStream(const TrainFlags& flags, const std::string& job, int rank,
                          int world_size);

// Normalized images [B, 1, 28, 28] and int64 labels [B] from a batch of the stream, on
// the device its tensors are on. Throws c10::Error if the counts differ.
std::pair<torch::Tensor, torch::Tensor> FashionBatchInputs(const Batch& batch);

// The share of the test split that `net` (on `device`) classifies correctly, read in
// order through emberd as job "<job>.eval" and moved to `device`. Leaves `net` in eval
// mode. Throws c10::Error if the dataset gives no samples, and what ember::Loader throws.
double FashionTestAccuracy(Client& client, FashionCnn& net, const std::string& job,
                           const TrainFlags& flags, const torch::Device& device);

}  // namespace ember::examples

#endif  // EMBER_SDK_EXAMPLES_FASHION_COMMON_H_
