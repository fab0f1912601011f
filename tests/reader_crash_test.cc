// A trainer SIGKILLed mid-epoch: emberd frees its ring and keeps serving other streams;
// the daemon's open descriptors and shared memory return to their earlier level.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>


#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

TEST_CASE("a killed reader's ring is freed and other streams keep flowing") {
  Daemon daemon;
  const std::string& dir = daemon.dir();
  {
    auto client = StartWithSyntheticDataset(daemon, 2000);
    auto survivor = client->OpenStream(ReaderOptions("survivor", 16, 0));
    REQUIRE(survivor.ok());
    REQUIRE((*survivor)->Next().ok());

    auto status = client->GetStatus();
    REQUIRE(status.ok());
    const uint64_t shm_before = status->shm_bytes_in_use;
    const int fds_before = CountFds(daemon.pid());
    const int memfds_before = CountMemfds(daemon.pid());
    const int maps_before = CountMemfdMappings(daemon.pid());
    REQUIRE(memfds_before == 1);

    const std::string out = dir + "/victim.out";
    pid_t victim = Spawn({Runfile("tests/stream_reader_main"), daemon.socket(), "syn", "victim", "2"},
                         {}, out, dir + "/victim.err");
    REQUIRE(Eventually([&] { return ReadFileOrEmpty(out).find("ready") != std::string::npos; }));
    CHECK(CountMemfds(daemon.pid()) == memfds_before + 1);
    CHECK(CountMemfdMappings(daemon.pid()) > maps_before);
    status = client->GetStatus();
    REQUIRE(status.ok());
    CHECK(status->streams.size() == 2);
    CHECK(status->shm_bytes_in_use > shm_before);

    REQUIRE(kill(victim, SIGKILL) == 0);
    REQUIRE(WaitFor(victim, std::chrono::seconds(5)) != -1);

    CHECK(Eventually([&] {
      return CountFds(daemon.pid()) == fds_before && CountMemfds(daemon.pid()) == memfds_before &&
             CountMemfdMappings(daemon.pid()) == maps_before;
    }));
    status = client->GetStatus();
    REQUIRE(status.ok());
    REQUIRE(status->streams.size() == 1);
    CHECK(status->streams[0].job == "survivor");
    CHECK(status->shm_bytes_in_use == shm_before);
    // The victim's job is gone from the ledger too.
    for (const auto& job : status->jobs) CHECK(job.job != "victim");

    // The surviving stream keeps serving.
    for (int i = 0; i < 300; ++i) {
      auto next = (*survivor)->Next();
      REQUIRE(next.ok());
    }
    CHECK((*survivor)->batches_read() >= 290);
  }
  daemon.Stop();
}

TEST_CASE("a reader that disconnects without closing its stream frees it too") {
  Daemon daemon;
  {
    auto admin = StartWithSyntheticDataset(daemon, 200);
    const int memfds_before = CountMemfds(daemon.pid());
    {
      auto client = daemon.Connect();
      auto reader = client->OpenStream(ReaderOptions("brief", 10, 0));
      REQUIRE(reader.ok());
      auto next = (*reader)->Next();
      REQUIRE(next.ok());
      // The client goes away first; the reader (and a batch) outlive it.
      client.reset();
    }
    CHECK(Eventually([&] {
      auto s = admin->GetStatus();
      return s.ok() && s->streams.empty() && CountMemfds(daemon.pid()) == memfds_before;
    }));
  }
  daemon.Stop();
}

TEST_CASE("a reader gets an error, not a hang, when emberd stops under it") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 500);
  auto reader = client->OpenStream(ReaderOptions("orphan", 10, 0));
  REQUIRE(reader.ok());
  auto held = (*reader)->Next();  // a batch still viewed while the daemon goes away
  REQUIRE(held.ok());
  daemon.Stop();  // must stop cleanly although a client and a stream are live

  const auto start = std::chrono::steady_clock::now();
  Status error;
  for (int i = 0; i < 100 && error.ok(); ++i) {
    auto next = (*reader)->Next();  // batches already in the ring, then the end
    if (!next.ok()) error = next.status();
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  INFO(error.ToString());
  CHECK((error.code() == StatusCode::kCancelled || error.code() == StatusCode::kUnavailable));
  CHECK(!client->connected());
  // The batch taken before is still readable: the mapping outlives the daemon.
  CHECK((*held)->tensors.at(1).nbytes == 10);
}

}  // namespace
}  // namespace ember::testing
