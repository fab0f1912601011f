#include "ember/loader_state.h"

#include <catch2/catch.hpp>

namespace ember {
namespace {

TEST_CASE("a loader state round-trips through its text") {
  const LoaderState state{0xfedcba9876543210ULL, 42, 3, 12345};
  CHECK(state.ToString() ==
        "ember-loader-state 1 fingerprint=fedcba9876543210 seed=42 epoch=3 position=12345");
  Result<LoaderState> parsed = LoaderState::Parse(state.ToString());
  REQUIRE(parsed.ok());
  CHECK(*parsed == state);
  CHECK(LoaderState::Parse(state.ToString() + "\n").ok());  // a trailing newline is fine
}

TEST_CASE("a malformed loader state is refused, naming what is wrong") {
  auto error = [](const std::string& text) {
    Result<LoaderState> parsed = LoaderState::Parse(text);
    REQUIRE(!parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    return parsed.status().message();
  };
  CHECK_THAT(error("hello"), Catch::Contains("does not start with 'ember-loader-state'"));
  CHECK_THAT(error("ember-loader-state 2 seed=1"), Catch::Contains("version 2"));
  CHECK_THAT(error("ember-loader-state 1 fingerprint=00 seed=1 epoch=2"),
             Catch::Contains("no position"));
  CHECK_THAT(error("ember-loader-state 1 fingerprint=00 seed=x epoch=2 position=0"),
             Catch::Contains("seed: 'x' is not a number"));
  CHECK_THAT(error("ember-loader-state 1 fingerprint=00 seed=-1 epoch=2 position=0"),
             Catch::Contains("seed: '-1'"));
  CHECK_THAT(error("ember-loader-state 1 fingerprint=00 seed=1 epoch=2 position=0 color=red"),
             Catch::Contains("unknown field 'color=red'"));
  CHECK_THAT(error("ember-loader-state 1 fingerprint=00 seed=1 seed=1 epoch=2 position=0"),
             Catch::Contains("seed appears twice"));
}

}  // namespace
}  // namespace ember
