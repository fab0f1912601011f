// Checkpoint and resume through the whole stack: the example trainer under ember-run on a
// real emberd, with --checkpoint and --sample-log. A run stopped or killed mid-epoch and
// resumed on another world size and batch size trains on every sample exactly once per
// epoch (the union of the ranks' sample logs); two identical runs log the same samples,
// and a run of 2 ranks x B the same per-step sample sets as one of 1 rank x 2B.
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

constexpr uint32_t kTrainSamples = 640;
constexpr uint32_t kEpochs = 2;

struct LogLine {
  uint64_t epoch, step, rank, id;
};

// Every line of every DIR/rank-<r>.log.
std::vector<LogLine> ReadSampleLogs(const std::string& dir) {
  std::vector<LogLine> lines;
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  std::vector<std::string> names;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name.rfind("rank-", 0) == 0) names.push_back(name);
  }
  closedir(d);
  for (const std::string& name : names) {
    std::istringstream in(ReadFileOrEmpty(dir + "/" + name));
    for (std::string text; std::getline(in, text);) {
      LogLine line{};
      if (std::sscanf(text.c_str(), "%lu %lu %lu %lu", &line.epoch, &line.step, &line.rank,
                      &line.id) != 4 ||
          "rank-" + std::to_string(line.rank) + ".log" != name)
        FAIL(dir << "/" << name << ": '" << text << "' is not 'epoch step rank sample_id'");
      lines.push_back(line);
    }
  }
  return lines;
}

// Fails the test unless `lines` hold each of the kTrainSamples ids exactly once in each of
// the kEpochs epochs.
void CheckExactlyOncePerEpoch(const std::vector<LogLine>& lines) {
  std::map<uint64_t, std::map<uint64_t, int>> count;  // epoch -> id -> times
  for (const LogLine& line : lines) ++count[line.epoch][line.id];
  REQUIRE(count.size() == kEpochs);
  for (const auto& [epoch, ids] : count) {
    INFO("epoch " << epoch);
    CHECK(ids.size() == kTrainSamples);
    int repeated = 0;
    for (const auto& [id, times] : ids) repeated += times != 1;
    CHECK(repeated == 0);
    CHECK(ids.rbegin()->first == kTrainSamples - 1);
  }
}

// (epoch, step) -> the ids of that global step over all ranks.
std::map<std::pair<uint64_t, uint64_t>, std::set<uint64_t>> StepSets(
    const std::vector<LogLine>& lines) {
  std::map<std::pair<uint64_t, uint64_t>, std::set<uint64_t>> sets;
  for (const LogLine& line : lines) sets[{line.epoch, line.step}].insert(line.id);
  return sets;
}

class Trainers {
 public:
  Trainers() { StartWithSyntheticSplits(daemon_, kTrainSamples, 64, "syn"); }
  ~Trainers() { daemon_.Stop(); }

  const std::string& dir() const { return daemon_.dir(); }

  // ember-run --nproc `ranks` -- fashion_mnist_train on syn-train with `args`.
  std::vector<std::string> Command(int ranks, uint32_t batch_size,
                                   const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {Runfile("tools/ember_run/ember-run"),
                                     "--nproc",
                                     std::to_string(ranks),
                                     "--socket",
                                     daemon_.socket(),
                                     "--",
                                     Runfile("sdk/examples/fashion_mnist_train"),
                                     "--train-dataset",
                                     "syn-train",
                                     "--test-dataset",
                                     "syn-test",
                                     "--epochs",
                                     std::to_string(kEpochs),
                                     "--batch-size",
                                     std::to_string(batch_size),
                                     "--seed",
                                     "5"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // Runs Command(...) to its end; fails the test unless it exits 0.
  std::string Train(int ranks, uint32_t batch_size, const std::vector<std::string>& args) {
    ProcessOutput run = RunToExit(Command(ranks, batch_size, args), dir(), std::chrono::seconds(60));
    INFO("stdout:\n" << run.out << "\nstderr:\n" << run.err << "\nemberd log:\n" << daemon_.log());
    REQUIRE(run.exit_code == 0);
    return run.out;
  }

 private:
  Daemon daemon_;
};

TEST_CASE("a run stopped mid-epoch on 2 ranks resumes on 1 rank with another batch size") {
  Trainers trainers;
  const std::string checkpoint = trainers.dir() + "/ckpt", logs = trainers.dir() + "/logs";
  // 20 global steps of 2 x 16 per epoch: stopped at epoch 0 step 13, checkpoints at 5, 10, 13.
  const std::string first = trainers.Train(
      2, 16,
      {"--checkpoint", checkpoint, "--checkpoint-every", "5", "--sample-log", logs,
       "--stop-after-steps", "13"});
  CHECK(first.find("stopped: after 13 steps of this run (13 in all); checkpoint " + checkpoint +
                   "/checkpoint.pt") != std::string::npos);
  CHECK(first.find("result:") == std::string::npos);
  // What a run killed after its checkpoint leaves behind: lines of later steps (their
  // samples are served again on resume) and a line cut short.
  {
    std::ofstream rank1(logs + "/rank-1.log", std::ios::app);
    rank1 << "0 13 1 0\n0 13 1 1\n0 14 1 2\n0 14 1";
  }
  const std::string second =
      trainers.Train(1, 24, {"--checkpoint", checkpoint, "--sample-log", logs});
  INFO(second);
  CHECK(second.find("resumed: from " + checkpoint +
                    "/checkpoint.pt at epoch 0 step 13 (13 steps done; written by 2 ranks x 16, "
                    "now 1 x 24;") != std::string::npos);
  CHECK(second.find("result: test_accuracy=") != std::string::npos);

  const std::vector<LogLine> lines = ReadSampleLogs(logs);
  CheckExactlyOncePerEpoch(lines);
  const auto sets = StepSets(lines);
  // Epoch 0: steps 0-12 of 32 samples by the first run, then the 224 samples left in
  // steps of 24 (the last two share 32 + 8: tail rule), numbered on from 13.
  CHECK(sets.at({0, 12}).size() == 32);
  CHECK(sets.at({0, 13}).size() == 24);
  CHECK(sets.rbegin()->first == std::pair<uint64_t, uint64_t>{1, 26});  // 640 / 24: 27 steps
  for (const LogLine& line : lines)
    if (line.rank == 1) CHECK(line.step < 13);
}

TEST_CASE("a run killed mid-epoch resumes from its last checkpoint, each sample once") {
  Trainers trainers;
  const std::string checkpoint = trainers.dir() + "/ckpt", logs = trainers.dir() + "/logs";
  const std::string out = trainers.dir() + "/killed.out";
  // Batches of 4: 80 global steps per epoch, slow enough to be killed in the middle.
  const pid_t run = Spawn(trainers.Command(2, 4,
                                           {"--checkpoint", checkpoint, "--checkpoint-every",
                                            "10", "--sample-log", logs}),
                          {}, out, out);
  // Once a checkpoint exists and rank 0 has logged steps past it, kill both ranks.
  const bool past_checkpoint = Eventually(
      [&] {
        if (ReadFileOrEmpty(checkpoint + "/checkpoint.pt").empty()) return false;
        return ReadFileOrEmpty(logs + "/rank-0.log").find("\n0 25 0 ") != std::string::npos;
      },
      std::chrono::seconds(40));
  std::istringstream children(
      ReadFileOrEmpty("/proc/" + std::to_string(run) + "/task/" + std::to_string(run) +
                      "/children"));
  int killed = 0;
  for (pid_t child; children >> child;) killed += kill(child, SIGKILL) == 0;
  const int status = WaitFor(run, std::chrono::seconds(30));
  INFO(ReadFileOrEmpty(out));
  REQUIRE(past_checkpoint);
  CHECK(killed == 2);
  REQUIRE(status != -1);
  CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));

  const std::string resumed =
      trainers.Train(1, 8, {"--checkpoint", checkpoint, "--sample-log", logs});
  INFO(resumed);
  const size_t resumed_at = resumed.find("resumed: from " + checkpoint);
  REQUIRE(resumed_at != std::string::npos);
  // Where it was killed varies; say where it resumed.
  WARN(resumed.substr(resumed_at, resumed.find('\n', resumed_at) - resumed_at));
  CheckExactlyOncePerEpoch(ReadSampleLogs(logs));
}

TEST_CASE("identical runs log identical samples; 2 ranks x 16 and 1 x 32 share every step") {
  Trainers trainers;
  const std::string a = trainers.dir() + "/a", b = trainers.dir() + "/b", c = trainers.dir() + "/c";
  trainers.Train(2, 16, {"--sample-log", a});
  trainers.Train(2, 16, {"--sample-log", b});
  trainers.Train(1, 32, {"--sample-log", c});
  for (const char* name : {"/rank-0.log", "/rank-1.log"}) {
    INFO(name);
    const std::string first = ReadFileOrEmpty(a + name);
    CHECK(first.size() > kTrainSamples);  // "0 0 0 1\n" is 8 bytes: a full half of 2 epochs
    CHECK(first == ReadFileOrEmpty(b + name));
  }
  const std::vector<LogLine> two_ranks = ReadSampleLogs(a);
  CheckExactlyOncePerEpoch(two_ranks);
  const auto sets = StepSets(two_ranks);
  CHECK(sets.size() == 2 * kTrainSamples / 32);
  CHECK(sets == StepSets(ReadSampleLogs(c)));
  CHECK(sets.at({0, 0}) != sets.at({1, 0}));  // shuffled again each epoch
}

}  // namespace
}  // namespace ember::testing
