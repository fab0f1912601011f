#include "common/log_budget.h"

#include <catch2/catch.hpp>

namespace ember {
namespace {

TEST_CASE("LogBudget lets N lines through per window and counts the ones it held back") {
  LogBudget budget(3, 1000);
  uint64_t held = 99;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(budget.Allow(10 + i, &held));
    CHECK(held == 0);
  }
  for (int i = 0; i < 500; ++i) CHECK_FALSE(budget.Allow(20 + i, &held));
  // The next window: the first line says how many were held back.
  REQUIRE(budget.Allow(1010, &held));
  CHECK(held == 500);
  REQUIRE(budget.Allow(1011, &held));
  CHECK(held == 0);
  REQUIRE(budget.Allow(1012, &held));
  CHECK_FALSE(budget.Allow(1013, &held));
  CHECK_FALSE(budget.Allow(1014, &held));
  CHECK(budget.TakeHeldBack() == 2);
  CHECK(budget.TakeHeldBack() == 0);
  // 0 lines per window is taken as 1.
  LogBudget one(0, 1000);
  CHECK(one.Allow(0, &held));
  CHECK_FALSE(one.Allow(1, &held));
}

}  // namespace
}  // namespace ember
