#include "sdk/sync/communicator_args.h"

#include <chrono>
#include <string>

#include <catch2/catch.hpp>

#include "sdk/sync/error_of_testing.h"

namespace ember::sdk {
namespace {

using std::chrono::milliseconds;

TEST_CASE("good arguments give the start of the factory's messages") {
  CHECK(CheckCommunicatorArgs("gloo", "g", 1, 2, milliseconds(5)) ==
        "gloo communicator 'g' (rank 1 of 2)");
  CHECK(CheckCommunicatorArgs("shared-memory", "s", 0, 4, milliseconds(5), 4) ==
        "shared-memory communicator 's' (rank 0 of 4)");
}

TEST_CASE("bad arguments are refused, naming the communicator") {
  CHECK(ErrorOf([] { CheckCommunicatorArgs("gloo", "g", 0, 0, milliseconds(5)); })
            .find("gloo communicator 'g' (rank 0 of 0): world size must be at least 1") !=
        std::string::npos);
  CHECK(ErrorOf([] { CheckCommunicatorArgs("shm", "s", 0, 5, milliseconds(5), 4); })
            .find("shm communicator 's' (rank 0 of 5): world size must be 1 to 4") !=
        std::string::npos);
  CHECK(ErrorOf([] { CheckCommunicatorArgs("gloo", "g", 2, 2, milliseconds(5)); })
            .find("(rank 2 of 2): rank is outside the world") != std::string::npos);
  CHECK(ErrorOf([] { CheckCommunicatorArgs("gloo", "g", -1, 2, milliseconds(5)); })
            .find("rank is outside the world") != std::string::npos);
  CHECK(ErrorOf([] { CheckCommunicatorArgs("gloo", "g", 0, 1, milliseconds(0)); })
            .find("timeout must be positive, got 0 ms") != std::string::npos);
}

}  // namespace
}  // namespace ember::sdk
