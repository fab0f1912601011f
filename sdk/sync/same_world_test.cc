#include "sdk/sync/same_world.h"

#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "sdk/sync/error_of_testing.h"

namespace ember::sdk {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Runs CheckSameWorld for each (rank, world size) on its own thread, all in one store;
// returns each rank's error ("" if it passed).
std::vector<std::string> Check(const std::vector<std::pair<int, int>>& ranks,
                               milliseconds timeout) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  return ErrorsOfThreads(static_cast<int>(ranks.size()), [&](int i) {
    CheckSameWorld(*store, "group", ranks[i].first, ranks[i].second, timeout);
  });
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST_CASE("ranks started with the same world size pass") {
  CHECK(Check({{0, 3}, {1, 3}, {2, 3}}, milliseconds(10000)) == std::vector<std::string>(3, ""));
}

TEST_CASE("different world sizes fail every rank at once, naming both sizes") {
  const Clock::time_point start = Clock::now();
  std::vector<std::string> errors = Check({{0, 2}, {1, 3}, {2, 3}}, milliseconds(30000));
  CHECK(SecondsSince(start) < 10);  // far from the 30 s timeout
  CHECK(errors[0] ==
        "rank 1 was started with world size 3, this rank with 2 (every rank of the group "
        "must be given the same world size)");
  CHECK(errors[1].find("rank 0 was started with world size 2, this rank with 3") == 0);
  CHECK(errors[2].find("rank 0 was started with world size 2, this rank with 3") == 0);
}

TEST_CASE("a peer that never joins is named once the timeout has passed") {
  const Clock::time_point start = Clock::now();
  std::vector<std::string> errors = Check({{0, 3}, {2, 3}}, milliseconds(300));
  CHECK(SecondsSince(start) < 10);
  INFO(errors[0]);
  CHECK(errors[0].find("rank 1 did not join within 300 ms (") == 0);
  CHECK(errors[1].find("rank 1 did not join within 300 ms (") == 0);
}

TEST_CASE("a world of one touches nothing") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  CheckSameWorld(*store, "group", 0, 1, milliseconds(100));
  CHECK(store->getNumKeys() == 0);
}

}  // namespace
}  // namespace ember::sdk
