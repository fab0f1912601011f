#include "daemon/coordinator/epoch_orders.h"

#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

std::vector<uint64_t> PlanIds(uint64_t n, uint64_t seed, uint64_t epoch, PositionRange range,
                              bool shuffle = true) {
  Result<EpochPlan> plan = MakeEpochPlan(n, 1, 1, seed, epoch, shuffle);
  REQUIRE(plan.ok());
  return std::vector<uint64_t>(plan->ids(range), plan->ids(range) + range.size());
}

TEST_CASE("ids are the plan's, with and without shuffle") {
  EpochOrders orders;
  for (bool shuffle : {true, false})
    for (uint64_t epoch : {0, 1, 5}) {
      INFO("shuffle " << shuffle << " epoch " << epoch);
      CHECK(orders.Ids({1000, 3, shuffle}, epoch, {10, 42}) ==
            PlanIds(1000, 3, epoch, {10, 42}, shuffle));
    }
  CHECK(orders.Ids({1000, 3, true}, 0, {0, 0}).empty());
}

TEST_CASE("the next epoch's order is built ahead once a lease reaches the second half") {
  EpochOrders orders;
  const OrderKey key{5000, 9, true};
  orders.Ids(key, 0, {0, 100});
  orders.WaitIdle();
  CHECK(orders.stats().built_here == 1);
  CHECK(orders.stats().built_ahead == 0);  // the first half: nothing ahead yet
  orders.Ids(key, 0, {2400, 2500});
  orders.WaitIdle();
  CHECK(orders.stats().built_ahead == 1);
  // The next epoch's first lease waits for nothing, and gets the plan's ids.
  CHECK(orders.Ids(key, 1, {0, 64}) == PlanIds(5000, 9, 1, {0, 64}));
  CHECK(orders.stats().built_here == 1);
  CHECK(orders.stats().held == 2);
}

TEST_CASE("at most two epochs of one order are held, and few in all") {
  EpochOrders orders;
  const OrderKey key{2000, 1, true};
  for (uint64_t epoch = 0; epoch < 6; ++epoch) {
    CHECK(orders.Ids(key, epoch, {1990, 2000}) == PlanIds(2000, 1, epoch, {1990, 2000}));
    orders.WaitIdle();
    CHECK(orders.stats().held <= EpochOrders::kKeptPerOrder);
  }
  CHECK(orders.stats().built_here == 1);  // each later epoch was built ahead
  CHECK(orders.stats().built_ahead == 6);
  for (uint64_t seed = 2; seed < 8; ++seed) {
    orders.Ids({2000, seed, true}, 0, {0, 1});
    CHECK(orders.stats().held <= EpochOrders::kKeptInAll);
  }
  // Without shuffle nothing is held.
  EpochOrders identity;
  identity.Ids({2000, 1, false}, 0, {0, 2000});
  CHECK(identity.stats().held == 0);
}

TEST_CASE("an order unused for the idle time is dropped") {
  EpochOrders orders(std::chrono::milliseconds(20));
  orders.Ids({3000, 1, true}, 0, {0, 10});
  CHECK(orders.stats().held == 1);
  for (int i = 0; i < 200 && orders.stats().held != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(orders.stats().held == 0);
}

TEST_CASE("callers of one epoch at once build its order once") {
  EpochOrders orders;
  const OrderKey key{200000, 4, true};
  const std::vector<uint64_t> expected = PlanIds(200000, 4, 0, {100, 200});
  std::vector<std::thread> threads;
  std::vector<std::vector<uint64_t>> got(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] { got[t] = orders.Ids(key, 0, {100, 200}); });
  for (std::thread& t : threads) t.join();
  for (const auto& ids : got) CHECK(ids == expected);
  CHECK(orders.stats().built_here == 1);
}

}  // namespace
}  // namespace ember::daemon
