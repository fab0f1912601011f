// One rank of data_parallel_test: training of a small network wrapped in
// ember::DataParallel over a Gloo communicator that meets its peers in a c10d::FileStore,
// or over a shared-memory one whose segment is a file beside it (--backend).
//
// Every rank starts from a different random init. After every optimizer step it checks
// that its parameters are bitwise identical to rank 0's and that the DataParallel
// counters say what happened (one synced backward per step, every bucket launched once,
// none launched at the end of backward when every parameter had a gradient on this
// rank, nothing sent under NoSync). At the end it checks the parameters against the
// same network trained in one process on the concatenated batches of all ranks (1e-5
// relative), which it computes itself.
//
// Exit codes (the reason is on stderr): 0 ok, 1 bad arguments, 2 a collective failed,
// 3 parameters differ from rank 0's, 4 parameters differ from single-process training,
// 5 a parameter that no rank used got a gradient, 7 bucket layout or counters are wrong.
// After a failure it leaves with _Exit so that the test does not wait for Gloo's threads
// to notice that their peer is gone.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "ember/data_parallel.h"
#include "ember/model_sync.h"
#include "sdk/sync/communicator_testing.h"
#include "sdk/sync/parameter_diff_testing.h"

namespace {

constexpr int64_t kBatch = 16;
constexpr int64_t kInputs = 8;
constexpr int64_t kHidden = 16;
constexpr int64_t kClasses = 4;
constexpr uint64_t kInitSeed = 100;  // rank r initializes from kInitSeed + r
constexpr double kLearningRate = 0.1;
constexpr double kTolerance = 1e-5;

// Which ranks leave the `aux` or `extra` layer out of their forward pass.
enum class Unused { kNone, kOneRank, kAllRanks };

struct Usage {
  bool aux = true;
  bool extra = true;
};

Usage UsageOf(Unused unused, int rank) {
  Usage usage;
  if (unused == Unused::kOneRank) usage.aux = rank == 0;  // only rank 0 uses aux
  if (unused == Unused::kAllRanks) usage.extra = false;   // no rank uses extra
  return usage;
}

// `scale` is float64, so gradients travel in buckets of two dtypes; `marker` is a buffer.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc = register_module("fc", torch::nn::Linear(kInputs, kHidden));
    aux = register_module("aux", torch::nn::Linear(kHidden, kHidden));
    head = register_module("head", torch::nn::Linear(kHidden, kClasses));
    extra = register_module("extra", torch::nn::Linear(kClasses, kClasses));
    scale = register_parameter("scale", 1 + 0.1 * torch::randn({kClasses}, torch::kFloat64));
    marker = register_buffer("marker", torch::randn({3}));
  }

  torch::Tensor forward(const torch::Tensor& x, Usage usage) {
    torch::Tensor h = torch::relu(fc(x));
    if (usage.aux) h = h + torch::tanh(aux(h));
    torch::Tensor out = head(h) * scale.to(torch::kFloat32);
    if (usage.extra) out = out + extra(out);
    return out;
  }

  torch::nn::Linear fc{nullptr}, aux{nullptr}, head{nullptr}, extra{nullptr};
  torch::Tensor scale, marker;
};
TORCH_MODULE(Net);

Net MakeNet(uint64_t seed) {
  torch::manual_seed(seed);
  return Net();
}

// The loss of rank `rank`'s micro-batch `micro` of optimizer step `step`, scaled so that
// the micro-batches of a step add up to the mean over the step's batch.
torch::Tensor MicroLoss(Net& net, Unused unused, int rank, int step, int micro, int micros) {
  torch::manual_seed(1000 + 100 * step + 10 * micro + rank);
  torch::Tensor x = torch::randn({kBatch, kInputs});
  torch::Tensor y = torch::randint(0, kClasses, {kBatch}, torch::kInt64);
  return torch::nn::functional::cross_entropy(net->forward(x, UsageOf(unused, rank)), y) / micros;
}

// The same training in one process: the loss is the mean over all ranks' batches.
Net TrainReference(Unused unused, int world_size, int steps, int micros) {
  Net net = MakeNet(kInitSeed);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(kLearningRate));
  for (int step = 1; step <= steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::zeros({});
    for (int rank = 0; rank < world_size; ++rank) {
      for (int micro = 0; micro < micros; ++micro) {
        loss = loss + MicroLoss(net, unused, rank, step, micro, micros);
      }
    }
    (loss / world_size).backward();
    optimizer.step();
  }
  return net;
}

[[noreturn]] void Exit(int code) {
  std::fflush(stderr);
  std::_Exit(code);
}

// Buckets must cover every parameter once, each in reverse registration order, and
// start in reverse registration order.
bool BucketsAreReversed(const std::vector<std::vector<int64_t>>& layout, int64_t parameters) {
  std::set<int64_t> seen;
  int64_t previous_first = parameters;
  for (const std::vector<int64_t>& bucket : layout) {
    if (bucket.empty() || bucket.front() >= previous_first) return false;
    previous_first = bucket.front();
    for (size_t i = 0; i < bucket.size(); ++i) {
      if (i > 0 && bucket[i] >= bucket[i - 1]) return false;
      if (!seen.insert(bucket[i]).second) return false;
    }
  }
  return static_cast<int64_t>(seen.size()) == parameters;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one rank of data_parallel_test"};
  ember::sdk::testing::WorkerFlags flags;
  flags.steps = 20;
  std::string unused_name = "none";
  int micros = 1, min_buckets = 1, max_buckets = 1 << 20, stall_after_step = -1;
  int64_t bucket_bytes = ember::DataParallelOptions{}.bucket_bytes;
  int64_t first_bucket_bytes = ember::DataParallelOptions{}.first_bucket_bytes;
  ember::sdk::testing::AddWorkerFlags(app, flags);
  app.add_option("--micro-batches", micros, "backward passes per step, all but the last in NoSync");
  app.add_option("--bucket-bytes", bucket_bytes);
  app.add_option("--first-bucket-bytes", first_bucket_bytes);
  app.add_option("--min-buckets", min_buckets, "fail unless there are at least this many");
  app.add_option("--max-buckets", max_buckets, "fail unless there are at most this many");
  app.add_option("--unused", unused_name, "none, one-rank (aux on rank 0 only) or all-ranks")
      ->check(CLI::IsMember({"none", "one-rank", "all-ranks"}));
  app.add_option("--stall-after-step", stall_after_step,
                 "stop taking part after that step (0: before DataParallel)");
  return ember::sdk::testing::WorkerMain(app, argc, argv, flags, [&] {
    const int rank = flags.rank;
    const int steps = flags.steps;
    const Unused unused = unused_name == "none"       ? Unused::kNone
                          : unused_name == "one-rank" ? Unused::kOneRank
                                                      : Unused::kAllRanks;
    auto stall = [&](int step) {
      if (step != stall_after_step) return;
      std::fprintf(stderr, "rank %d: stalling after step %d as asked\n", rank, step);
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::seconds(120));
    };

    std::shared_ptr<ember::Communicator> comm =
        ember::sdk::testing::MakeTestCommunicator(flags, "data_parallel_test");
    stall(0);

    Net net = MakeNet(kInitSeed + rank);
    ember::DataParallelOptions options;
    options.bucket_bytes = bucket_bytes;
    options.first_bucket_bytes = first_bucket_bytes;
    ember::DataParallel ddp(*net, comm, options);
    ember::ModelSync check(*net, comm);
    if (!check.MatchesRoot()) {
      std::fprintf(stderr, "rank %d: differs from rank 0 after construction\n", rank);
      Exit(3);
    }
    const auto layout = ddp.BucketLayout();
    if (static_cast<int>(layout.size()) < min_buckets ||
        static_cast<int>(layout.size()) > max_buckets ||
        !BucketsAreReversed(layout, static_cast<int64_t>(net->parameters().size()))) {
      std::fprintf(stderr, "rank %d: bad bucket layout (%zu buckets, %d to %d wanted)\n", rank,
                   layout.size(), min_buckets, max_buckets);
      Exit(7);
    }
    const int64_t buckets = static_cast<int64_t>(layout.size());
    const Usage usage = UsageOf(unused, rank);
    const bool all_used_here = usage.aux && usage.extra;

    torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(kLearningRate));
    for (int step = 1; step <= steps; ++step) {
      optimizer.zero_grad();
      for (int micro = 0; micro + 1 < micros; ++micro) {
        const ember::DataParallelStats before = ddp.stats();
        {
          auto no_sync = ddp.NoSync();
          MicroLoss(net, unused, rank, step, micro, micros).backward();
        }
        const ember::DataParallelStats after = ddp.stats();
        if (after.synced_backward_passes != before.synced_backward_passes ||
            after.buckets_launched_during_backward != before.buckets_launched_during_backward ||
            after.buckets_launched_at_end != before.buckets_launched_at_end) {
          std::fprintf(stderr, "rank %d: a backward pass under NoSync communicated\n", rank);
          Exit(7);
        }
      }
      MicroLoss(net, unused, rank, step, micros - 1, micros).backward();
      optimizer.step();

      const ember::DataParallelStats stats = ddp.stats();
      const int64_t launched = stats.buckets_launched_during_backward + stats.buckets_launched_at_end;
      if (stats.synced_backward_passes != step || launched != step * buckets ||
          stats.finish_time <= std::chrono::nanoseconds::zero() ||
          (all_used_here && stats.buckets_launched_at_end != 0) ||
          (!all_used_here && stats.buckets_launched_at_end == 0)) {
        std::fprintf(stderr,
                     "rank %d: after step %d: %lld synced passes, %lld buckets launched during "
                     "backward and %lld at the end, with %lld buckets\n",
                     rank, step, static_cast<long long>(stats.synced_backward_passes),
                     static_cast<long long>(stats.buckets_launched_during_backward),
                     static_cast<long long>(stats.buckets_launched_at_end),
                     static_cast<long long>(buckets));
        Exit(7);
      }
      if (!check.MatchesRoot()) {
        std::fprintf(stderr, "rank %d: parameters differ from rank 0 after step %d\n", rank, step);
        Exit(3);
      }
      ember::sdk::testing::DieIfAsked(flags, step);
      stall(step);
    }

    if (unused == Unused::kAllRanks && (net->extra->weight.grad().defined() ||
                                        net->extra->bias.grad().defined())) {
      std::fprintf(stderr, "rank %d: the layer no rank used got a gradient\n", rank);
      Exit(5);
    }

    Net reference = TrainReference(unused, flags.world_size, steps, micros);
    const ember::sdk::testing::ParameterDiff diff =
        ember::sdk::testing::CompareParameters(*net, *reference);
    if (!ember::sdk::testing::MatchesSingleProcess(diff, kTolerance, rank)) Exit(4);
    std::fprintf(stderr,
                 "rank %d: ok after %d steps with %lld buckets; worst relative difference %.3g\n",
                 rank, steps, static_cast<long long>(buckets), diff.worst);
    return 0;
  });
}
