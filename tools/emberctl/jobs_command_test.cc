// What `emberctl jobs` and `job inspect` make of a status: the slowest rank among the
// joined ones, the job's epoch and progress over ranks in different epochs, the nodes.
#include "tools/emberctl/jobs_command.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace ember::emberctl {
namespace {

// What `print` writes to a FILE*, each run of spaces made one.
std::string Captured(const std::function<void(std::FILE*)>& print) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* f = open_memstream(&buffer, &size);
  REQUIRE(f != nullptr);
  print(f);
  std::fclose(f);
  std::string text;
  for (size_t i = 0; i < size; ++i)
    if (buffer[i] != ' ' || text.empty() || text.back() != ' ') text += buffer[i];
  std::free(buffer);
  return text;
}

// Job "j" of 3 ranks, 10 batches each per epoch: rank 0 in epoch 1 at 2 of them, rank 1
// in epoch 0 at 7, rank 2 (not joined) in epoch 0 at 4. A stream here for ranks 0 and 1.
DaemonStatus ThreeRanks() {
  JobStatus job;
  job.job = "j";
  job.dataset = "syn";
  job.world_size = 3;
  job.batch_size = 16;
  job.batches_per_rank = 10;
  job.ranks = {{0, true, 1, 2, 4}, {1, true, 0, 7, 3}, {2, false, 0, 4, 0}};
  DaemonStatus status;
  status.jobs = {job};
  StreamStatus s0, s1;
  s0.job = s1.job = "j";
  s0.stream_id = 5;
  s1.stream_id = 6;
  s1.rank = 1;
  s1.ring_fill = 0.5;
  status.streams = {s0, s1};
  return status;
}

TEST_CASE("the slowest rank is the lowest (epoch, consumed) of the joined ranks") {
  DaemonStatus status = ThreeRanks();
  JobStatus& job = status.jobs[0];
  REQUIRE(SlowestRank(job) != nullptr);
  CHECK(SlowestRank(job)->rank == 1);  // rank 2 is behind it but not joined
  CHECK(JobEpoch(job) == 0);           // over all ranks
  job.ranks[1].epoch = 1;
  job.ranks[1].consumed = 2;
  CHECK(SlowestRank(job)->rank == 0);  // a tie on (epoch, consumed): the first
  job.ranks[0].joined = job.ranks[1].joined = false;
  CHECK(SlowestRank(job) == nullptr);
}

TEST_CASE("emberctl jobs: epoch progress counts ranks past the epoch in full") {
  const DaemonStatus status = ThreeRanks();
  CHECK(RankNode(status, status.jobs[0], status.jobs[0].ranks[0]) == "local");
  const std::string out = Captured([&](std::FILE* f) { PrintJobs(status, f); });
  INFO(out);
  // Epoch 0: rank 0 consumed all 10, rank 1 7, rank 2 4 of 30; 7 leases in flight.
  CHECK(out.find("21/30 (70%)") != std::string::npos);
  CHECK(out.find(" 7 r1 e0 7/10 ") != std::string::npos);
  CHECK(out.find(" local local,local,-\n") != std::string::npos);
  CHECK(Captured([](std::FILE* f) { PrintJobs({}, f); }) == "no jobs\n");
  // A rank that joined through another node's daemon shows that node.
  DaemonStatus remote = ThreeRanks();
  remote.jobs[0].ranks[1].node = "node-b";
  CHECK(RankNode(remote, remote.jobs[0], remote.jobs[0].ranks[1]) == "node-b");
}

TEST_CASE("emberctl job inspect: a row per rank, stream columns where it has one") {
  DaemonStatus status = ThreeRanks();
  status.jobs[0].ranks[1].joined = false;  // joined nowhere, but its stream lingers
  status.jobs[0].ranks[2].joined = true;   // joined, with no stream here
  const std::string out =
      Captured([&](std::FILE* f) { CHECK(InspectJob(status, "j", f, stderr) == 0); });
  INFO(out);
  CHECK(out.find("consumed 21/30 (70%) of the epoch's batches\n") != std::string::npos);
  CHECK(out.find("slowest rank r2 e0 4/10\n") != std::string::npos);
  CHECK(out.find("\n0 yes local 1 2/10 4 #5 0 0%\n") != std::string::npos);
  CHECK(out.find("\n1 no local 0 7/10 3 #6 0 50%\n") != std::string::npos);
  CHECK(out.find("\n2 yes ? 0 4/10 0\n") != std::string::npos);

  const std::string err =
      Captured([&](std::FILE* f) { CHECK(InspectJob(status, "k", stdout, f) == 1); });
  CHECK(err == "emberctl: job 'k' not found (jobs: j)\n");
  status.jobs.resize(9, status.jobs[0]);
  CHECK(Captured([&](std::FILE* f) { InspectJob(status, "k", stdout, f); })
            .find("(9 jobs (emberctl jobs lists them))") != std::string::npos);
}

TEST_CASE("a job another daemon coordinates: its address, progress over this node's ranks") {
  DaemonStatus status = ThreeRanks();
  JobStatus& job = status.jobs[0];
  job.coordinator = "10.0.0.5:7000";
  job.ranks = {{1, true, 0, 7, 3, "node-b"}};  // only this node's rank
  const std::string out = Captured([&](std::FILE* f) { PrintJobs(status, f); });
  INFO(out);
  CHECK(out.find("7/10 (70%)") != std::string::npos);
  CHECK(out.find(" 10.0.0.5:7000 node-b\n") != std::string::npos);
  const std::string inspected =
      Captured([&](std::FILE* f) { CHECK(InspectJob(status, "j", f, stderr) == 0); });
  INFO(inspected);
  CHECK(inspected.find("coordinator 10.0.0.5:7000 (ranks below: this node's only)\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace ember::emberctl
