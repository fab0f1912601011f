// Real LibTorch training through the whole stack: ember-run starts 2 ranks of the
// example trainer, batches come from a real emberd, gradients go through shared memory
// from the daemon (the default) or over Gloo bootstrapped through the daemon's store.
// With --check-sync the trainer verifies after every
// optimizer step that all ranks hold bitwise-identical parameters, and fails otherwise.
// Also: ember-run stops the whole run when one rank fails.
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <chrono>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

int ExitCode(int status) { return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

TEST_CASE("2 ranks train with identical parameters after every optimizer step") {
  const std::string collectives = GENERATE(std::string("shm"), std::string("gloo"));
  INFO("--collectives " << collectives);
  Daemon daemon;
  const std::string& dir = daemon.dir();
  StartWithSyntheticSplits(daemon, 2048, 256, "syn");  // the datasets outlive the client
  const std::string out = dir + "/train.out", err = dir + "/train.err";
  pid_t run = Spawn({Runfile("tools/ember_run/ember-run"), "--nproc", "2", "--socket", daemon.socket(),
                     "--", Runfile("sdk/examples/fashion_mnist_train"), "--train-dataset",
                     "syn-train", "--test-dataset", "syn-test", "--epochs", "2", "--max-steps",
                     "24", "--check-sync", "--collectives", collectives},
                    {}, out, err);
  const int status = WaitFor(run, std::chrono::seconds(240));
  INFO("stdout:\n" << ReadFileOrEmpty(out) << "\nstderr:\n" << ReadFileOrEmpty(err)
                   << "\nemberd log:\n" << daemon.log());
  REQUIRE(status != -1);
  CHECK(ExitCode(status) == 0);
  const std::string output = ReadFileOrEmpty(out);
  CHECK(output.find("result: test_accuracy=") != std::string::npos);
  CHECK(output.find("ranks=2") != std::string::npos);
  daemon.Stop();
}

TEST_CASE("ember-run fails the whole run, naming the rank, when one rank fails") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string err = dir + "/run.err";
  const auto start = std::chrono::steady_clock::now();
  pid_t run = Spawn({Runfile("tools/ember_run/ember-run"), "--nproc", "3", "--job", "t", "--",
                     "/bin/sh", "-c",
                     "test \"$EMBER_WORLD_SIZE\" = 3 && test \"$EMBER_JOB\" = t || exit 9; "
                     "if [ \"$EMBER_RANK\" = 1 ]; then sleep 0.2; exit 7; fi; exec sleep 60"},
                    {}, "", err);
  const int status = WaitFor(run, std::chrono::seconds(30));
  REQUIRE(status != -1);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  CHECK(ExitCode(status) == 7);
  const std::string message = ReadFileOrEmpty(err);
  INFO(message);
  CHECK(message.find("rank 1") != std::string::npos);
  CHECK(message.find("exited with code 7") != std::string::npos);
}

}  // namespace
}  // namespace ember::testing
