// A job's progress survives emberd being killed: after a restart on the same state dir
// each rank continues at its first unconsumed batch, and every sample of the epoch is
// delivered exactly once across the runs before and after the kill.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

constexpr uint32_t kSamples = 1000;
constexpr uint32_t kBatch = 16;
constexpr uint32_t kWorld = 2;
constexpr uint64_t kBatchesPerRank = 32;  // ceil(1000 / (16 x 2)) steps

StreamOptions RankOptions(uint32_t rank) {
  StreamOptions options = ReaderOptions("survivor", kBatch, 1);
  options.seed = 11;
  options.rank = rank;
  options.world_size = kWorld;
  options.sample_ids = true;
  return options;
}

// Reads one batch and appends its sample ids (from the "sample_id" tensor) to *ids;
// the batch's slot goes back to the daemon when it returns. False at the epoch's end.
bool ReadBatch(StreamReader& reader, std::vector<int64_t>* ids, uint64_t* index) {
  auto next = reader.Next();
  INFO(next.status().ToString());
  REQUIRE(next.ok());
  if (!next->has_value()) return false;
  const RawBatch& batch = **next;
  auto tensor = std::find_if(batch.tensors.begin(), batch.tensors.end(),
                             [](const RawTensor& t) { return t.name == "sample_id"; });
  REQUIRE(tensor != batch.tensors.end());
  const auto* data = static_cast<const int64_t*>(tensor->data);
  ids->insert(ids->end(), data, data + batch.num_samples);
  *index = batch.index_in_epoch;
  return true;
}

uint64_t Consumed(Client& client, uint32_t rank) {
  auto status = client.GetStatus();
  REQUIRE(status.ok());
  for (const JobStatus& job : status->jobs)
    if (job.job == "survivor") return job.ranks.at(rank).consumed;
  return 0;
}

TEST_CASE("after emberd is killed and restarted, ranks continue at their first unconsumed batch") {
  const uint64_t kBefore[kWorld] = {10, 6};  // batches each rank consumes before the kill
  Daemon daemon;
  std::vector<int64_t> ids;
  {
    auto admin = StartWithSyntheticDataset(daemon, kSamples);
    std::vector<std::unique_ptr<Client>> clients;
    std::vector<std::unique_ptr<StreamReader>> readers;
    for (uint32_t r = 0; r < kWorld; ++r) {
      clients.push_back(daemon.Connect());
      auto reader = clients.back()->OpenStream(RankOptions(r));
      INFO(reader.status().ToString());
      REQUIRE(reader.ok());
      readers.push_back(std::move(reader).value());
    }
    for (uint32_t r = 0; r < kWorld; ++r) {
      uint64_t index = 0;
      for (uint64_t i = 0; i < kBefore[r]; ++i) {
        REQUIRE(ReadBatch(*readers[r], &ids, &index));
        CHECK(index == i);
      }
    }
    // The daemon commits a batch once its slot comes back (the producer sees that when it
    // wants the slot again); each rank has more batches leased in its ring, not consumed.
    for (uint32_t r = 0; r < kWorld; ++r)
      REQUIRE(Eventually([&] { return Consumed(*admin, r) == kBefore[r]; }));
    // Commits are synced in groups every 20 ms and a SIGKILL loses the last group: idle
    // well past it so that everything consumed is durable, and the test exact.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    daemon.Kill();
  }  // the readers and clients of the dead daemon go

  daemon.Start();
  CHECK(daemon.log().find("replayed 1 jobs") != std::string::npos);
  {
    // One rank after the other: a rank's stream never waits for another's.
    for (uint32_t r = 0; r < kWorld; ++r) {
      INFO("rank " << r);
      auto client = daemon.Connect();
      auto reader = client->OpenStream(RankOptions(r));
      INFO(reader.status().ToString());
      REQUIRE(reader.ok());
      uint64_t index = 0, count = 0;
      while (ReadBatch(**reader, &ids, &index)) {
        if (count++ == 0) CHECK(index == kBefore[r]);
      }
      CHECK(count == kBatchesPerRank - kBefore[r]);
    }
  }
  std::sort(ids.begin(), ids.end());
  std::vector<int64_t> all(kSamples);
  for (uint32_t i = 0; i < kSamples; ++i) all[i] = i;
  CHECK(ids == all);
  daemon.Stop();
}

TEST_CASE("a damaged jobs journal stops emberd, naming the file and the offset") {
  TempDir dir;
  const std::string state = dir.path() + "/state";
  REQUIRE(mkdir(state.c_str(), 0755) == 0);
  const std::string journal = state + "/jobs.journal";
  const std::string garbage = "NOT A JOURNAL, NOT EVEN CLOSE";
  {
    std::ofstream out(journal, std::ios::binary);
    out << garbage;
  }
  ProcessOutput run = RunToExit(EmberdCommand(dir.path()), dir.path(), std::chrono::seconds(30));
  INFO(run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find(journal + ": not a journal: bad magic at byte 0. emberd does not start on "
                     "a damaged journal") != std::string::npos);
  CHECK(run.err.find("(mv " + journal + " " + journal + ".damaged)") != std::string::npos);
  CHECK(ReadFileOrEmpty(journal) == garbage);  // left for someone to look at
}

}  // namespace
}  // namespace ember::testing
