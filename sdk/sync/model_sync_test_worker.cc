// One rank of model_sync_test: data-parallel training of a tiny network through
// ModelSync over a Gloo communicator that meets its peers in a c10d::FileStore, or over
// a shared-memory one whose segment is a file beside it (--backend).
//
// Every rank starts from a different random init; after BroadcastParameters and after
// every optimizer step it checks that its parameters are bitwise identical to rank 0's,
// and at the end that they match (1e-5 relative) the same network trained in one process
// on the concatenated batches of all ranks, which it computes itself.
//
// Exit codes (the reason is on stderr): 0 ok, 1 bad arguments, 2 a collective failed,
// 3 parameters differ from rank 0's, 4 parameters differ from single-process training,
// 5 a parameter that no rank used got a gradient, 6 ranks agreed before the broadcast.
#include <cstdio>
#include <memory>
#include <utility>

#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "ember/model_sync.h"
#include "sdk/sync/communicator_testing.h"
#include "sdk/sync/parameter_diff_testing.h"

namespace {

constexpr int64_t kBatch = 16;
constexpr int64_t kInputs = 8;
constexpr int64_t kHidden = 16;
constexpr int64_t kClasses = 4;
// Width of `wide` and `unused_wide`: their weights are kHidden * kWide and
// kClasses * kWide floats, 1 MiB and more, so ModelSync all-reduces them in place
// rather than packed with the small ones.
constexpr int64_t kWide = 16384;
constexpr uint64_t kInitSeed = 100;  // rank r initializes from kInitSeed + r
constexpr double kLearningRate = 0.1;
constexpr double kTolerance = 1e-5;

// Rank 0 alone goes through `aux` and `wide`, so on other ranks their parameters have no
// gradient; `unused` and `unused_wide` are used by no rank; `scale` is float64, so
// gradients travel in two dtype groups; `marker` is a buffer. `wide` and `unused_wide`
// are large (see kWide), the others small.
struct TinyNetImpl : torch::nn::Module {
  explicit TinyNetImpl(int64_t hidden) {
    fc = register_module("fc", torch::nn::Linear(kInputs, hidden));
    aux = register_module("aux", torch::nn::Linear(hidden, hidden));
    unused = register_module("unused", torch::nn::Linear(kClasses, kClasses));
    wide = register_module("wide", torch::nn::Linear(hidden, kWide));
    unused_wide = register_module("unused_wide", torch::nn::Linear(kClasses, kWide));
    head = register_module("head", torch::nn::Linear(hidden, kClasses));
    scale = register_parameter("scale", 1 + 0.1 * torch::randn({kClasses}, torch::kFloat64));
    marker = register_buffer("marker", torch::randn({3}));
  }

  torch::Tensor forward(const torch::Tensor& x, bool use_aux) {
    torch::Tensor h = torch::relu(fc(x));
    if (use_aux) {
      h = h + torch::tanh(aux(h));
      h = h + torch::tanh(wide(h)).view({h.size(0), h.size(1), -1}).mean(2);
    }
    return head(h) * scale.to(torch::kFloat32);
  }

  torch::nn::Linear fc{nullptr}, aux{nullptr}, unused{nullptr}, head{nullptr};
  torch::nn::Linear wide{nullptr}, unused_wide{nullptr};
  torch::Tensor scale, marker;
};
TORCH_MODULE(TinyNet);

TinyNet MakeNet(uint64_t seed, int64_t hidden = kHidden) {
  torch::manual_seed(seed);
  return TinyNet(hidden);
}

// Rank `rank`'s batch for optimizer step `step`.
std::pair<torch::Tensor, torch::Tensor> MakeBatch(int rank, int step) {
  torch::manual_seed(1000 + 100 * step + rank);
  torch::Tensor x = torch::randn({kBatch, kInputs});
  torch::Tensor y = torch::randint(0, kClasses, {kBatch}, torch::kInt64);
  return {x, y};
}

torch::Tensor RankLoss(TinyNet& net, int rank, int step) {
  auto [x, y] = MakeBatch(rank, step);
  return torch::nn::functional::cross_entropy(net->forward(x, rank == 0), y);
}

// The same training in one process: the loss is the mean over all ranks' batches.
TinyNet TrainReference(int world_size, int steps) {
  TinyNet net = MakeNet(kInitSeed);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(kLearningRate));
  for (int step = 1; step <= steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::zeros({});
    for (int rank = 0; rank < world_size; ++rank) loss = loss + RankLoss(net, rank, step);
    (loss / world_size).backward();
    optimizer.step();
  }
  return net;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one rank of model_sync_test"};
  ember::sdk::testing::WorkerFlags flags;
  int odd_rank = -1;
  ember::sdk::testing::AddWorkerFlags(app, flags);
  app.add_option("--odd-rank", odd_rank, "this rank builds a network unlike the others'");
  return ember::sdk::testing::WorkerMain(app, argc, argv, flags, [&] {
    const int rank = flags.rank;
    std::shared_ptr<ember::Communicator> comm =
        ember::sdk::testing::MakeTestCommunicator(flags, "model_sync_test");

    TinyNet net = MakeNet(kInitSeed + rank, rank == odd_rank ? kHidden + 1 : kHidden);
    ember::ModelSync sync(*net, comm);
    // MatchesRoot needs equal layouts; only BroadcastParameters checks them.
    const bool layouts_differ = odd_rank >= 0;
    const bool matched_before = !layouts_differ && sync.MatchesRoot();
    if (!layouts_differ && rank == 0 && !matched_before) {
      std::fprintf(stderr, "rank 0: differs from itself before the broadcast\n");
      return 3;
    }
    if (!layouts_differ && rank != 0 && matched_before) {
      std::fprintf(stderr, "rank %d: already equal to rank 0 before the broadcast\n", rank);
      return 6;
    }
    sync.BroadcastParameters();
    if (!sync.MatchesRoot()) {
      std::fprintf(stderr, "rank %d: differs from rank 0 after BroadcastParameters\n", rank);
      return 3;
    }

    torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(kLearningRate));
    for (int step = 1; step <= flags.steps; ++step) {
      optimizer.zero_grad();
      RankLoss(net, rank, step).backward();
      sync.AverageGradients();
      optimizer.step();
      if (!sync.MatchesRoot()) {
        std::fprintf(stderr, "rank %d: parameters differ from rank 0 after step %d\n", rank,
                     step);
        return 3;
      }
      ember::sdk::testing::DieIfAsked(flags, step);
    }

    if (net->unused->weight.grad().defined() || net->unused_wide->weight.grad().defined()) {
      std::fprintf(stderr, "rank %d: an unused layer got a gradient\n", rank);
      return 5;
    }

    TinyNet reference = TrainReference(flags.world_size, flags.steps);
    const ember::sdk::testing::ParameterDiff diff =
        ember::sdk::testing::CompareParameters(*net, *reference);
    if (!ember::sdk::testing::MatchesSingleProcess(diff, kTolerance, rank)) return 4;
    std::fprintf(stderr, "rank %d: ok after %d steps; worst relative difference %.3g\n", rank,
                 flags.steps, diff.worst);
    return 0;
  });
}
