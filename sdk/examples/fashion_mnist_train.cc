// Data-parallel training of a small CNN on Fashion-MNIST, reading batches through emberd.
//
// One process per rank, started by ember-run (which sets EMBER_RANK, EMBER_WORLD_SIZE,
// EMBER_JOB and EMBER_SOCKET) or by hand; without them it is rank 0 of 1 in job
// "fashion-mnist". Gradients are averaged over the ranks by ember::DataParallel, as by
// DDP (buckets launched during backward), through shared memory from the daemon
// (--collectives shm, the default; across nodes Gloo between the nodes' leaders) or with
// Gloo bootstrapped through the daemon (--collectives gloo). Rank 0 then evaluates on the
// test split and prints
//   result: test_accuracy=0.9012 train_seconds=123.45 ranks=2
//
// Checkpoint and resume: with --checkpoint DIR, rank 0 writes DIR/checkpoint.pt (model,
// optimizer, loader state, step counters; train_checkpoint.h) every --checkpoint-every
// global steps, at the end of each epoch and when --stop-after-steps stops the run; a run
// that finds one there resumes from it on every rank, with any world size and batch
// size, and prints
//   resumed: from DIR/checkpoint.pt at epoch 0 step 120 (...)
// --sample-log DIR writes each rank's samples, one line per sample (sample_log.h). A run
// killed at any point (SIGKILL included) can be resumed: the checkpoint is replaced
// atomically and the sample logs are cut back to what it covers.
// Exit codes: 0 done (or stopped by --stop-after-steps), 1 an error (on stderr),
// 3 --check-sync found ranks out of sync.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include "common/env.h"
#include "ember/client.h"
#include "ember/data_parallel.h"
#include "ember/launch_env.h"
#include "ember/loader.h"
#include "ember/make_communicator.h"
#include "ember/model_sync.h"
#include "sdk/examples/fashion_cnn.h"
#include "sdk/examples/fashion_common.h"
#include "sdk/examples/heap_tuning.h"
#include "sdk/examples/program_main.h"
#include "sdk/examples/sample_log.h"
#include "sdk/examples/train_checkpoint.h"

namespace {

using ember::examples::CheckpointPath;
using ember::examples::Fatal;
using ember::examples::kSyncTimeout;
using ember::examples::LoadCheckpoint;
using ember::examples::RemoveCheckpointLeftovers;
using ember::examples::SampleLog;
using ember::examples::SaveCheckpoint;
using ember::examples::Seconds;
using ember::examples::StepMark;
using ember::examples::TrainCheckpoint;

using Clock = std::chrono::steady_clock;

void Check(const ember::Status& status) {
  if (!status.ok()) throw Fatal(status.ToString());
}

template <typename T>
T Check(ember::Result<T> result) {
  if (!result.ok()) throw Fatal(result.status().ToString());
  return std::move(result).value();
}

struct Flags {
  ember::examples::TrainFlags train;
  int threads = 1;
  bool check_sync = false;
  std::string collectives = "shm";
  std::string checkpoint_dir;     // empty: no checkpoints
  uint64_t checkpoint_every = 0;  // 0: at the end of each epoch only
  std::string sample_log_dir;     // empty: no sample log
  uint64_t stop_after_steps = 0;  // 0: run to the end
};

// Whether the step about to be taken ends with a checkpoint: every --checkpoint-every
// steps of the whole training, at the end of each epoch, and when this run stops.
bool CheckpointDue(const Flags& flags, const ember::Batch& batch, uint64_t total_steps_after,
                   uint64_t run_steps_after) {
  if (flags.checkpoint_dir.empty()) return false;
  return batch.last_in_epoch ||
         (flags.checkpoint_every != 0 && total_steps_after % flags.checkpoint_every == 0) ||
         run_steps_after == flags.stop_after_steps ||
         total_steps_after == flags.train.max_steps;
}

int Run(const Flags& all_flags, const ember::LaunchEnv& launch) {
  const ember::examples::TrainFlags& flags = all_flags.train;
  const int rank = launch.rank;
  const int world_size = launch.world_size;
  const std::string& job = launch.job;
  ember::examples::KeepStepBuffersInHeap();
  torch::set_num_threads(all_flags.threads);
  torch::manual_seed(flags.seed);
  std::unique_ptr<ember::Env> env = ember::NewPosixEnv();

  std::unique_ptr<ember::Client> client = ember::examples::ConnectForTraining(flags);

  ember::examples::FashionCnn net;
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(flags.lr));
  std::optional<TrainCheckpoint> resumed;
  if (!all_flags.checkpoint_dir.empty()) {
    if (rank == 0) Check(RemoveCheckpointLeftovers(*env, all_flags.checkpoint_dir));
    resumed = Check(LoadCheckpoint(*env, all_flags.checkpoint_dir, *net, optimizer));
  }
  // The steps before `start` are done (by earlier runs, when resumed).
  const StepMark start{resumed ? resumed->loader.epoch : 0, resumed ? resumed->step_in_epoch : 0};
  uint64_t total_steps = resumed ? resumed->total_steps : 0;
  if (resumed && rank == 0) {
    std::printf("resumed: from %s at epoch %llu step %llu (%llu steps done; written by %u ranks "
                "x %u, now %d x %u; %s)\n",
                CheckpointPath(all_flags.checkpoint_dir).c_str(),
                static_cast<unsigned long long>(start.epoch),
                static_cast<unsigned long long>(start.step),
                static_cast<unsigned long long>(total_steps), resumed->world_size,
                resumed->batch_size, world_size, flags.batch_size,
                resumed->loader.ToString().c_str());
    std::fflush(stdout);
  }
  std::unique_ptr<SampleLog> sample_log;
  if (!all_flags.sample_log_dir.empty()) {
    sample_log = Check(SampleLog::Open(*env, all_flags.sample_log_dir, static_cast<uint32_t>(rank),
                                       static_cast<uint32_t>(world_size), start));
  }
  const bool trained_out = start.epoch >= flags.epochs ||
                           (flags.max_steps != 0 && total_steps >= flags.max_steps);

  // The stream before the communicator: emberd loads the dataset and fills the ring while
  // the communicator is set up.
  std::optional<ember::Loader> loader;
  if (!trained_out) {
    ember::StreamOptions options = ember::examples::TrainStream(flags, job, rank, world_size);
    options.sample_ids = sample_log != nullptr;
    loader.emplace(*client, options,
                   resumed ? std::optional<ember::LoaderState>(resumed->loader) : std::nullopt);
  }

  std::shared_ptr<ember::Communicator> comm = ember::MakeCommunicator(
      *client, job, rank, world_size, ember::ModuleDevice(*net),
      {.timeout = kSyncTimeout,
       .cpu = all_flags.collectives == "gloo" ? ember::CpuCollectives::kGloo
                                              : ember::CpuCollectives::kSharedMemory,
       .local_world_size = launch.local_world_size});
  // Gives every rank rank 0's parameters; gradients are averaged when backward returns.
  ember::DataParallel ddp(*net, comm);
  std::optional<ember::ModelSync> check;  // --check-sync: compares with rank 0 after each step
  if (all_flags.check_sync) check.emplace(*net, comm);

  const Clock::time_point train_start = Clock::now();
  uint64_t run_steps = 0;
  bool stop = trained_out;
  bool stopped_early = false;
  for (uint64_t epoch = start.epoch; epoch < flags.epochs && !stop; ++epoch) {
    const Clock::time_point epoch_start = Clock::now();
    const std::chrono::nanoseconds wait_before = loader->reader().wait_time();
    const uint64_t first_step = epoch == start.epoch ? start.step : 0;
    uint64_t step_in_epoch = first_step;
    double loss_sum = 0;
    uint64_t epoch_steps = 0;
    const std::chrono::nanoseconds sync_before = ddp.stats().finish_time;
    net->train();
    while (auto batch = loader->Next()) {
      if (batch->epoch != epoch || first_step + batch->index_in_epoch != step_in_epoch) {
        throw Fatal("batch of epoch " + std::to_string(batch->epoch) + " step " +
                    std::to_string(batch->index_in_epoch) + " (from the start of this run) " +
                    "where epoch " + std::to_string(epoch) + " step " +
                    std::to_string(step_in_epoch) + " was due");
      }
      const bool checkpoint_due = CheckpointDue(all_flags, *batch, total_steps + 1, run_steps + 1);
      if (sample_log) {
        // Before this step's all-reduce, which rank 0 has to finish before it writes the
        // checkpoint: so every rank's lines of the steps a checkpoint covers are in its log.
        torch::Tensor ids = batch->at("sample_id").reshape({-1}).contiguous();
        Check(sample_log->Append(epoch, step_in_epoch, ids.data_ptr<int64_t>(),
                                 static_cast<size_t>(ids.numel())));
        if (checkpoint_due) Check(sample_log->Sync());
      }
      auto [x, y] = ember::examples::FashionBatchInputs(*batch);
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      loss.backward();
      optimizer.step();
      ++total_steps;
      ++run_steps;
      ++step_in_epoch;
      ++epoch_steps;
      loss_sum += loss.item<double>();
      if (check && !check->MatchesRoot()) {
        std::fprintf(stderr,
                     "fashion_mnist_train (rank %d): parameters differ from rank 0's after "
                     "step %llu\n",
                     rank, static_cast<unsigned long long>(total_steps));
        return 3;
      }
      if (checkpoint_due && rank == 0) {
        TrainCheckpoint checkpoint;
        checkpoint.loader = loader->state();
        checkpoint.step_in_epoch = checkpoint.loader.epoch == epoch ? step_in_epoch : 0;
        checkpoint.total_steps = total_steps;
        checkpoint.world_size = static_cast<uint32_t>(world_size);
        checkpoint.batch_size = flags.batch_size;
        Check(SaveCheckpoint(*env, all_flags.checkpoint_dir, *net, optimizer, checkpoint));
      }
      if (run_steps == all_flags.stop_after_steps) {
        stop = stopped_early = true;
        break;
      }
      if (flags.max_steps != 0 && total_steps >= flags.max_steps) {
        stop = true;
        break;
      }
    }
    if (rank == 0) {
      std::printf(
          "epoch %llu/%u loss=%.4f steps=%llu seconds=%.2f loader_wait_seconds=%.3f "
          "sync_seconds=%.3f\n",
          static_cast<unsigned long long>(epoch + 1), flags.epochs,
          epoch_steps ? loss_sum / epoch_steps : 0.0,
          static_cast<unsigned long long>(epoch_steps), Seconds(Clock::now() - epoch_start),
          Seconds(loader->reader().wait_time() - wait_before),
          Seconds(ddp.stats().finish_time - sync_before));
      std::fflush(stdout);
    }
  }
  const double train_seconds = Seconds(Clock::now() - train_start);
  loader.reset();

  if (stopped_early) {
    if (rank == 0) {
      std::printf("stopped: after %llu steps of this run (%llu in all)%s\n",
                  static_cast<unsigned long long>(run_steps),
                  static_cast<unsigned long long>(total_steps),
                  all_flags.checkpoint_dir.empty()
                      ? ", no checkpoint"
                      : ("; checkpoint " + CheckpointPath(all_flags.checkpoint_dir)).c_str());
      std::fflush(stdout);
    }
  } else if (rank == 0) {
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
  CLI::Option* checkpoint =
      app.add_option("--checkpoint", flags.checkpoint_dir,
                     "directory of the checkpoint to resume from (if there is one) and to write");
  app.add_option("--checkpoint-every", flags.checkpoint_every,
                 "also checkpoint every this many global steps (0: at the end of each epoch "
                 "only)")
      ->needs(checkpoint)
      ->capture_default_str();
  app.add_option("--sample-log", flags.sample_log_dir,
                 "directory of per-rank logs rank-<r>.log of 'epoch step rank sample_id' lines");
  app.add_option("--stop-after-steps", flags.stop_after_steps,
                 "stop (exit 0, without evaluating) after this many global steps of this run, "
                 "after a checkpoint (0: run to the end)")
      ->capture_default_str();
  return ember::examples::TrainerMain(
      app, argc, argv, "fashion_mnist_train",
      [&](const ember::LaunchEnv& launch) { return Run(flags, launch); });
}
