// bench/loader_bench against a real emberd: it reports each reader and the total rate in
// the lines bench/*.sh parse, and an unknown dataset or a bad argument give a clear
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
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
