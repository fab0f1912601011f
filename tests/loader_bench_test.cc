// bench/loader_bench against a real emberd: it reports each reader and the total rate in
// the lines bench/compare parses, the first batch and the measured window as they happen,
// whole epochs with --epochs, and an unknown dataset or a bad argument give a clear
// message and a non-zero exit.
#include <catch2/catch.hpp>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

TEST_CASE("loader_bench reads a dataset from R readers and reports the rate") {
  Daemon daemon;
  const std::string& dir = daemon.dir();
  StartWithSyntheticDataset(daemon, 300);
  auto bench = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {Runfile("bench/loader_bench"), "--socket", daemon.socket()});
    return RunToExit(args, dir);
  };
  ProcessOutput unknown = bench({"nope", "--seconds", "1"});
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("'nope'") != std::string::npos);
  CHECK(bench({"syn", "--ranks", "0"}).exit_code != 0);

  ProcessOutput run = bench({"syn", "--ranks", "2", "--batch-size", "16", "--seconds", "0.5"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("reader 0: ") != std::string::npos);
  CHECK(run.out.find("reader 1: ") != std::string::npos);
  CHECK(run.out.find("data wait: ") != std::string::npos);
  CHECK(run.out.find("bench: samples_per_s=") != std::string::npos);
  CHECK(run.out.find(" ranks=2 batch=16") != std::string::npos);
  CHECK(run.out.find("reader 1: first batch ") != std::string::npos);
  CHECK(run.out.find("reader 0: measuring from unix ") != std::string::npos);
  CHECK(run.out.find("reader 0: measured ") != std::string::npos);

  // 300 samples, 2 ranks of batch 16: each rank reads 150 samples an epoch.
  ProcessOutput epochs = bench({"syn", "--ranks", "2", "--batch-size", "16", "--epochs", "3"});
  INFO(epochs.err);
  CHECK(epochs.exit_code == 0);
  for (const char* epoch :
       {"reader 0: epoch 0: 150 samples in ", "reader 1: epoch 2: 150 samples in "})
    CHECK(epochs.out.find(epoch) != std::string::npos);
  CHECK(epochs.out.find("epoch 3:") == std::string::npos);
  CHECK(epochs.out.find("reader 1: 450 samples in ") != std::string::npos);
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
