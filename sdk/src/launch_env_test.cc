#include "ember/launch_env.h"

#include <cstdlib>

#include <catch2/catch.hpp>

namespace ember {
namespace {

void Set(const char* name, const char* value) {
  if (value == nullptr) {
    unsetenv(name);
  } else {
    setenv(name, value, 1);
  }
}

TEST_CASE("ReadLaunchEnv: defaults, ember-run's values, and bad values named") {
  Set("EMBER_RANK", nullptr);
  Set("EMBER_WORLD_SIZE", nullptr);
  Set("EMBER_JOB", nullptr);
  Set("EMBER_LOCAL_RANK", nullptr);
  auto alone = ReadLaunchEnv("solo");
  REQUIRE(alone.ok());
  CHECK(alone->rank == 0);
  CHECK(alone->world_size == 1);
  CHECK(alone->local_rank == 0);
  CHECK(alone->job == "solo");

  Set("EMBER_RANK", "1");
  Set("EMBER_WORLD_SIZE", "3");
  Set("EMBER_JOB", "job-7");
  auto launched = ReadLaunchEnv("solo");
  REQUIRE(launched.ok());
  CHECK(launched->rank == 1);
  CHECK(launched->world_size == 3);
  CHECK(launched->local_rank == 1);  // unset: the rank
  CHECK(launched->job == "job-7");
  Set("EMBER_LOCAL_RANK", "0");
  CHECK(ReadLaunchEnv("solo")->local_rank == 0);
  Set("EMBER_LOCAL_RANK", "-1");
  CHECK(ReadLaunchEnv("solo").status().message() ==
        "EMBER_LOCAL_RANK='-1' is not an integer >= 0");
  Set("EMBER_LOCAL_RANK", nullptr);

  Set("EMBER_RANK", "3");
  CHECK(ReadLaunchEnv("solo").status().ToString() ==
        "invalid_argument: EMBER_RANK='3' is not below EMBER_WORLD_SIZE=3");
  Set("EMBER_RANK", "1x");
  CHECK(ReadLaunchEnv("solo").status().message() == "EMBER_RANK='1x' is not an integer >= 0");
  Set("EMBER_RANK", "0");
  Set("EMBER_WORLD_SIZE", "0");
  CHECK(ReadLaunchEnv("solo").status().message() ==
        "EMBER_WORLD_SIZE='0' is not an integer >= 1");
  Set("EMBER_RANK", nullptr);
  Set("EMBER_WORLD_SIZE", nullptr);
  Set("EMBER_JOB", nullptr);
}

}  // namespace
}  // namespace ember
