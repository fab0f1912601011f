#include "daemon/stream/stream_forecast.h"

#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "daemon/coordinator/epoch_plan.h"

namespace ember::daemon {
namespace {

struct ForecastPlan : JobParams {
  uint32_t rank = 0;
  uint64_t end_epoch = 0;
  StreamForecast Make() const { return StreamForecast(*this, rank, end_epoch); }
};

ForecastPlan Plan() {
  ForecastPlan plan;
  plan.num_samples = 103;
  plan.batch_size = 4;
  plan.world_size = 3;
  plan.rank = 1;
  plan.seed = 5;
  plan.shuffle_shape = ShuffleShape::ByShards({0, 10, 25, 30, 60, 61, 103}, 2);
  return plan;
}

// The rank's reads, batch by batch, from (epoch, step) on, for two epochs: brute force.
std::vector<std::vector<uint64_t>> Reads(const ForecastPlan& plan, uint64_t epoch, uint64_t step) {
  std::vector<std::vector<uint64_t>> batches;
  for (uint64_t e = epoch; e < epoch + 2; ++e) {
    if (plan.end_epoch != 0 && e >= plan.end_epoch) break;
    Result<EpochPlan> p = MakeEpochPlan(plan.num_samples, plan.batch_size, plan.world_size,
                                        plan.seed, e, plan.shuffle,
                                        e == plan.start_epoch ? plan.start_position : 0, plan.shuffle_shape);
    REQUIRE(p.ok());
    for (uint64_t s = e == epoch ? step : 0; s < p->steps(); ++s)
      batches.push_back(p->RankIds(s, plan.rank, plan.shuffle_shape));
  }
  return batches;
}

void CheckAgainstPlan(const ForecastPlan& plan, StreamForecast& forecast, uint64_t epoch,
                      uint64_t step) {
  forecast.Advance(epoch, step);
  const auto reads = Reads(plan, epoch, step);
  // Upcoming: the batches after the current one, in order.
  std::vector<uint64_t> expect;
  for (size_t b = 1; b < reads.size() && b <= 5; ++b)
    expect.insert(expect.end(), reads[b].begin(), reads[b].end());
  CHECK(forecast.Upcoming(5) == expect);
  // NextRead of each id, and of ranges of ten.
  for (uint64_t begin = 0; begin < plan.num_samples; begin += 1) {
    for (uint64_t width : {uint64_t{1}, uint64_t{10}}) {
      std::optional<uint64_t> soonest;
      for (size_t b = 0; b < reads.size() && !soonest; ++b)
        for (uint64_t id : reads[b])
          if (id >= begin && id < begin + width) soonest = b;
      INFO("epoch " << epoch << " step " << step << " ids [" << begin << ", " << begin + width << ")");
      CHECK(forecast.NextRead(begin, begin + width) == soonest);
    }
  }
}

TEST_CASE("the forecast is the rank's part of the plan, this epoch and the next") {
  const ForecastPlan plan = Plan();
  StreamForecast forecast = plan.Make();
  CHECK(forecast.Batches() == 0);
  CheckAgainstPlan(plan, forecast, 0, 0);
  CheckAgainstPlan(plan, forecast, 0, 5);
  CheckAgainstPlan(plan, forecast, 0, 8);  // the last step: upcoming is the next epoch's
  CheckAgainstPlan(plan, forecast, 1, 2);
  CHECK(forecast.Batches() == 4);
}

TEST_CASE("a resumed epoch starts at its position; the last epoch has no next") {
  ForecastPlan plan = Plan();
  plan.shuffle = true;
  plan.shuffle_shape = {};
  plan.start_epoch = 2;
  plan.start_position = 40;
  plan.end_epoch = 3;
  StreamForecast forecast = plan.Make();
  CheckAgainstPlan(plan, forecast, 2, 1);
  forecast.Advance(2, 4);
  CHECK(forecast.Upcoming(100).size() < 103);  // nothing past epoch 2
}

}  // namespace
}  // namespace ember::daemon
