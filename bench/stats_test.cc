#include "bench/stats.h"

#include <cmath>

#include <catch2/catch.hpp>

namespace ember::bench {
namespace {

TEST_CASE("Median takes the middle value, or the mean of the middle two") {
  CHECK(Median({3, 1, 2}) == 2);
  CHECK(Median({4, 1, 3, 2}) == 2.5);
  CHECK(Median({7}) == 7);
  CHECK(std::isnan(Median({})));
}

TEST_CASE("Mean is the arithmetic mean") {
  CHECK(Mean({1, 2, 6}) == 3);
  CHECK(std::isnan(Mean({})));
}

TEST_CASE("Quantile takes the nearest rank below") {
  std::vector<double> values = {5, 1, 4, 2, 3};
  CHECK(Quantile(values, 0) == 1);
  CHECK(Quantile(values, 0.5) == 3);
  CHECK(Quantile(values, 0.99) == 4);
  CHECK(Quantile(values, 1) == 5);
  std::vector<double> none;
  CHECK(Quantile(none, 0.5) == 0);
}

}  // namespace
}  // namespace ember::bench
