// The key-value store and barriers through a real emberd: waits time out as the schema
// says, and a job's keys live as long as some connection holds a membership of it.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using std::chrono::milliseconds;

TEST_CASE("kvGet and barrier wait for each other and time out") {
  Daemon daemon;
  daemon.Start();
  auto rank0 = daemon.Connect();
  auto rank1 = daemon.Connect();

  Result<std::string> none = rank0->KvGet("job", "addr", milliseconds(0));
  CHECK(none.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(none.status().message() == "waiting for key 'addr' of job 'job': timed out after 0 ms");
  Result<std::string> late = rank0->KvGet("job", "addr", milliseconds(50));
  CHECK(late.status().message() == "waiting for key 'addr' of job 'job': timed out after 50 ms");

  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    REQUIRE(rank1->KvSet("job", "addr", "10.0.0.1:29500").ok());
  });
  Result<std::string> value = rank0->KvGet("job", "addr", milliseconds(10000));
  setter.join();
  REQUIRE(value.ok());
  CHECK(*value == "10.0.0.1:29500");

  Status alone = rank0->Barrier("job", "start", 2, milliseconds(50));
  CHECK(alone.code() == StatusCode::kDeadlineExceeded);
  std::thread other([&] { CHECK(rank1->Barrier("job", "start", 2, milliseconds(10000)).ok()); });
  CHECK(rank0->Barrier("job", "start", 2, milliseconds(10000)).ok());
  other.join();
  CHECK(rank0->Barrier("job", "start", 3, milliseconds(0)).code() == StatusCode::kDeadlineExceeded);
}

TEST_CASE("barrier names and keys are at most 1 KiB: resource_exhausted, as the schema says") {
  // A probe reported a 2 KiB barrier name accepted: every way in is checked here.
  Daemon daemon;
  daemon.Start();
  auto client = daemon.Connect();
  const std::string kib(1024, 'b'), two_kib(2048, 'b');
  CHECK(client->Barrier("job", kib, 1, milliseconds(0)).ok());
  for (uint32_t world : {1u, 2u}) {
    const Status refused = client->Barrier("job", two_kib, world, milliseconds(0));
    CHECK(refused.code() == StatusCode::kResourceExhausted);
    CHECK(refused.message() ==
          "job 'job': a barrier name of 2048 bytes is over the limit of 1024");
  }
  CHECK(client->KvSet("job", two_kib, "v").code() == StatusCode::kResourceExhausted);
  CHECK(client->KvGet("job", two_kib, milliseconds(0)).status().code() ==
        StatusCode::kResourceExhausted);
  CHECK(client->KvAdd("job", two_kib, 1).status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("a job's keys are dropped when its last connection goes") {
  Daemon daemon;
  daemon.Start();
  auto first = daemon.Connect();
  auto second = daemon.Connect();
  REQUIRE(first->KvSet("job", "k", "v").ok());
  REQUIRE(second->KvCheck("job", {"k"}).ok());
  first.reset();
  Result<bool> kept = second->KvCheck("job", {"k"});
  REQUIRE(kept.ok());
  CHECK(*kept);

  second.reset();
  auto later = daemon.Connect();
  // The daemon sees the disconnects asynchronously.
  Result<bool> present = false;
  CHECK(Eventually([&] {
    present = later->KvCheck("job", {"k"});
    return !present.ok() || !*present;
  }));
  REQUIRE(present.ok());
  CHECK_FALSE(*present);
  CHECK(later->KvSet("", "k", "v").code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ember::testing
