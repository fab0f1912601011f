// emberctl against a real emberd: registration errors name the file and what is wrong
// and leave the daemon and its catalog as they were; a missing daemon, an unknown
// dataset or a bad argument give a clear message and a non-zero exit; bench reports.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

struct Run {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Run Emberctl(const std::string& dir, std::vector<std::string> args) {
  static int n = 0;
  const std::string out = dir + "/ctl" + std::to_string(n) + ".out";
  const std::string err = dir + "/ctl" + std::to_string(n++) + ".err";
  args.insert(args.begin(), Runfile("tools/emberctl/emberctl"));
  pid_t pid = Spawn(args, {}, out, err);
  int status = WaitFor(pid, std::chrono::seconds(60));
  Run run;
  run.exit_code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  run.out = ReadFileOrEmpty(out);
  run.err = ReadFileOrEmpty(err);
  return run;
}

void Truncate(const std::string& path, size_t keep) {
  std::string bytes = ReadFileOrEmpty(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), keep);
}

TEST_CASE("emberctl dataset add rejects truncated and corrupt IDX files") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string good = dir + "/good", cut = dir + "/cut", bad = dir + "/bad";
  for (const auto& d : {good, cut, bad}) {
    std::filesystem::create_directories(d);
    WriteSyntheticIdx(d, "train", 200);
  }
  // A gzip stream cut in half, and a raw file whose magic is wrong.
  Truncate(cut + "/train-images-idx3-ubyte.gz",
           std::filesystem::file_size(cut + "/train-images-idx3-ubyte.gz") / 2);
  std::filesystem::remove(bad + "/train-labels-idx1-ubyte.gz");
  std::ofstream(bad + "/train-labels-idx1-ubyte", std::ios::binary) << "this is not an IDX file";

  Daemon daemon(dir);
  daemon.Start();
  const std::string sock = "--socket=" + daemon.socket();
  Run add = Emberctl(dir, {sock, "dataset", "add", "ok", "--format", "idx", "--path", good});
  INFO(add.err);
  REQUIRE(add.exit_code == 0);
  const std::string listing = Emberctl(dir, {sock, "dataset", "ls"}).out;

  Run truncated = Emberctl(dir, {sock, "dataset", "add", "cut", "--format", "idx", "--path", cut});
  CHECK(truncated.exit_code != 0);
  CHECK(truncated.err.find(cut + "/train-images-idx3-ubyte.gz") != std::string::npos);
  CHECK((truncated.err.find("truncated") != std::string::npos ||
         truncated.err.find("corrupt") != std::string::npos));

  Run corrupt = Emberctl(dir, {sock, "dataset", "add", "bad", "--format", "idx", "--path", bad});
  CHECK(corrupt.exit_code != 0);
  CHECK(corrupt.err.find(bad + "/train-labels-idx1-ubyte") != std::string::npos);
  CHECK(corrupt.err.find("magic") != std::string::npos);

  Run missing = Emberctl(dir, {sock, "dataset", "add", "gone", "--path", dir + "/nowhere"});
  CHECK(missing.exit_code != 0);
  CHECK(missing.err.find(dir + "/nowhere") != std::string::npos);

  // The daemon is up and its catalog unchanged.
  Run after = Emberctl(dir, {sock, "dataset", "ls"});
  CHECK(after.exit_code == 0);
  CHECK(after.out == listing);
  CHECK(kill(daemon.pid(), 0) == 0);
  daemon.Stop();
}

TEST_CASE("emberctl explains a missing daemon, an unknown dataset and bad arguments") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  Run no_daemon = Emberctl(dir, {"--socket", dir + "/none.sock", "status"});
  CHECK(no_daemon.exit_code != 0);
  CHECK(no_daemon.err.find(dir + "/none.sock") != std::string::npos);
  CHECK(no_daemon.err.find("is emberd running?") != std::string::npos);

  WriteSyntheticIdx(dir, "train", 300);
  Daemon daemon(dir);
  daemon.Start();
  const std::string sock = "--socket=" + daemon.socket();
  Run unknown = Emberctl(dir, {sock, "dataset", "inspect", "nope"});
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("'nope'") != std::string::npos);
  Run unknown_bench = Emberctl(dir, {sock, "bench", "nope", "--seconds", "1"});
  CHECK(unknown_bench.exit_code != 0);
  CHECK(unknown_bench.err.find("'nope'") != std::string::npos);
  Run bad_split = Emberctl(dir, {sock, "dataset", "add", "x", "--path", dir, "--split", "valid"});
  CHECK(bad_split.exit_code != 0);
  CHECK(bad_split.err.find("valid") != std::string::npos);
  Run bad_ranks = Emberctl(dir, {sock, "bench", "x", "--ranks", "0"});
  CHECK(bad_ranks.exit_code != 0);

  REQUIRE(Emberctl(dir, {sock, "dataset", "add", "syn", "--path", dir}).exit_code == 0);
  Run inspect = Emberctl(dir, {sock, "dataset", "inspect", "syn"});
  CHECK(inspect.out.find("300 samples") != std::string::npos);
  CHECK(inspect.out.find("uint8    [28,28]") != std::string::npos);
  Run bench = Emberctl(dir, {sock, "bench", "syn", "--ranks", "2", "--batch-size", "16",
                             "--seconds", "0.5"});
  INFO(bench.err);
  CHECK(bench.exit_code == 0);
  CHECK(bench.out.find("bench: samples_per_s=") != std::string::npos);
  CHECK(bench.out.find(" ranks=2 batch=16") != std::string::npos);
  Run status = Emberctl(dir, {sock, "status"});
  CHECK(status.exit_code == 0);
  CHECK(status.out.find("syn") != std::string::npos);
  CHECK(status.out.find("waiting for ranks") == std::string::npos);
  // A rendezvous that rank 2 of 3 has not joined yet shows up with the ranks it waits for.
  auto client = daemon.Connect();
  Result<int> fd = client->OpenSharedMemory("job-x", "grads", 2, 3, 4096);
  REQUIRE(fd.ok());
  close(*fd);
  Run waiting = Emberctl(dir, {sock, "status"});
  INFO(waiting.out);
  CHECK(waiting.out.find("shared-memory segments waiting for ranks (1)") != std::string::npos);
  CHECK(waiting.out.find("job job-x") != std::string::npos);
  CHECK(waiting.out.find("grads") != std::string::npos);
  CHECK(waiting.out.find("world 3") != std::string::npos);
  CHECK(waiting.out.find("for rank 0,1") != std::string::npos);
  Run rm = Emberctl(dir, {sock, "dataset", "rm", "syn"});
  CHECK(rm.exit_code == 0);
  CHECK(Emberctl(dir, {sock, "dataset", "rm", "syn"}).exit_code != 0);
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
