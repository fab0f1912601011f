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
