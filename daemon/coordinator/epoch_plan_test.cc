#include "daemon/coordinator/epoch_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

EpochPlan MustPlan(uint64_t n, uint32_t batch, uint32_t world, uint64_t seed, uint64_t epoch,
                   bool shuffle = true) {
  Result<EpochPlan> plan = MakeEpochPlan(n, batch, world, seed, epoch, shuffle);
  INFO(plan.status().ToString());
  REQUIRE(plan.ok());
  return std::move(plan).value();
}

std::vector<uint64_t> Sizes(const EpochPlan& plan) {
  std::vector<uint64_t> sizes;
  for (uint64_t b = 0; b < plan.num_batches(); ++b) sizes.push_back(plan.batch_size(b));
  return sizes;
}

std::vector<uint64_t> Iota(uint64_t n) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), uint64_t{0});
  return v;
}

TEST_CASE("the order is a fixed function of (seed, epoch)") {
  // Computed independently (SplitMix64 + Lemire's bounded draw + Fisher-Yates, in
  // Python); catches any change of the generator, the seeding or the shuffle.
  CHECK(MustPlan(10, 1, 1, 1, 0).order == std::vector<uint64_t>{9, 3, 6, 8, 7, 1, 2, 0, 4, 5});
  CHECK(MustPlan(10, 1, 1, 1, 1).order == std::vector<uint64_t>{7, 2, 6, 4, 0, 1, 8, 3, 5, 9});
  CHECK(MustPlan(10, 1, 1, 2, 0).order == std::vector<uint64_t>{4, 2, 1, 6, 9, 5, 0, 3, 8, 7});
}

TEST_CASE("the same (seed, epoch) gives the same plan") {
  const EpochPlan a = MustPlan(5000, 32, 3, 42, 7);
  const EpochPlan b = MustPlan(5000, 32, 3, 42, 7);
  CHECK(a.order == b.order);
  CHECK(a.batch_starts == b.batch_starts);
  CHECK(a.batches_per_rank == b.batches_per_rank);
}

TEST_CASE("different epochs and seeds give different orders") {
  const EpochPlan base = MustPlan(1000, 10, 2, 42, 0);
  CHECK(base.order != Iota(1000));
  CHECK(MustPlan(1000, 10, 2, 42, 1).order != base.order);
  CHECK(MustPlan(1000, 10, 2, 43, 0).order != base.order);
  // Seed and epoch are not interchangeable.
  CHECK(MustPlan(1000, 10, 2, 43, 0).order != MustPlan(1000, 10, 2, 42, 1).order);
  CHECK(MustPlan(1000, 10, 2, 0, 1).order != MustPlan(1000, 10, 2, 1, 0).order);
}

TEST_CASE("without shuffle the order is the identity for any seed and epoch") {
  CHECK(MustPlan(777, 16, 4, 42, 0, false).order == Iota(777));
  CHECK(MustPlan(777, 16, 4, 9, 5, false).order == Iota(777));
}

TEST_CASE("every sample appears exactly once") {
  for (uint64_t epoch = 0; epoch < 5; ++epoch) {
    EpochPlan plan = MustPlan(10007, 64, 3, 123, epoch);
    REQUIRE(plan.batch_starts.front() == 0);
    REQUIRE(plan.batch_starts.back() == 10007);
    std::vector<uint64_t> seen;
    for (uint64_t b = 0; b < plan.num_batches(); ++b) {
      seen.insert(seen.end(), plan.batch_ids(b), plan.batch_ids(b) + plan.batch_size(b));
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == Iota(10007));
  }
}

TEST_CASE("the shuffle is unbiased: every permutation of 3 is about equally likely") {
  std::map<std::vector<uint64_t>, int> counts;
  const int kTrials = 12000;
  for (int seed = 0; seed < kTrials; ++seed) counts[MustPlan(3, 1, 1, seed, 0).order]++;
  REQUIRE(counts.size() == 6);
  for (const auto& [order, count] : counts) {
    // Expected 2000 (sd 41). The classic bias, swapping with any position instead of
    // one at or below i, gives 1778 or 2222.
    INFO(order[0] << order[1] << order[2] << ": " << count);
    CHECK(count > 1870);
    CHECK(count < 2130);
  }
}

TEST_CASE("batch counts and sizes follow the rules for every small shape") {
  for (uint64_t n = 1; n <= 120; ++n) {
    for (uint32_t batch = 1; batch <= 9; ++batch) {
      for (uint32_t world = 1; world <= 5; ++world) {
        const uint64_t per_rank = (n + uint64_t{batch} * world - 1) / (uint64_t{batch} * world);
        const uint64_t total = per_rank * world;
        Result<EpochPlan> plan = MakeEpochPlan(n, batch, world, 1, 0, true);
        Result<uint64_t> counted = BatchesPerRank(n, batch, world);
        INFO("n " << n << " batch " << batch << " world " << world);
        if (n < total) {
          CHECK(plan.status().code() == StatusCode::kInvalidArgument);
          CHECK(counted.status().code() == StatusCode::kInvalidArgument);
          continue;
        }
        REQUIRE(plan.ok());
        REQUIRE(counted.ok());
        CHECK(*counted == per_rank);
        CHECK(plan->batches_per_rank == per_rank);
        REQUIRE(plan->num_batches() == total);
        const std::vector<uint64_t> sizes = Sizes(*plan);
        CHECK(std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}) == n);
        CHECK(*std::min_element(sizes.begin(), sizes.end()) >= 1);
        CHECK(*std::max_element(sizes.begin(), sizes.end()) <= batch);
        const uint64_t remainder = n - (total - world) * batch;
        if (remainder >= world) {
          for (uint64_t b = 0; b + world < total; ++b) CHECK(sizes[b] == batch);
          const auto tail = sizes.end() - world;
          CHECK(*std::max_element(tail, sizes.end()) - *std::min_element(tail, sizes.end()) <= 1);
        } else {
          CHECK(*std::max_element(sizes.begin(), sizes.end()) -
                    *std::min_element(sizes.begin(), sizes.end()) <=
                1);
        }
      }
    }
  }
}

TEST_CASE("the remainder is shared by the last world_size batches") {
  // 10 samples, 3 per batch, 2 ranks: 2 full batches, then 4 samples over 2 batches.
  CHECK(Sizes(MustPlan(10, 3, 2, 1, 0)) == std::vector<uint64_t>{3, 3, 2, 2});
  // 10 samples, 4 per batch, 4 ranks: no full batch, 10 over 4.
  CHECK(Sizes(MustPlan(10, 4, 4, 1, 0)) == std::vector<uint64_t>{3, 3, 2, 2});
}

TEST_CASE("a remainder smaller than world_size spreads all samples over all batches") {
  // 9 samples, 2 per batch, 4 ranks: 8 batches; 4 full ones would leave 1 sample for the
  // last 4, so all 8 share the 9 samples.
  const EpochPlan plan = MustPlan(9, 2, 4, 1, 0);
  CHECK(plan.batches_per_rank == 2);
  CHECK(Sizes(plan) == std::vector<uint64_t>{2, 1, 1, 1, 1, 1, 1, 1});
}

TEST_CASE("Fashion-MNIST train split, batch 64, 2 ranks: 469 batches per rank") {
  Result<uint64_t> per_rank = BatchesPerRank(60000, 64, 2);
  REQUIRE(per_rank.ok());
  CHECK(*per_rank == 469);
  const EpochPlan plan = MustPlan(60000, 64, 2, 0, 0);
  CHECK(plan.batches_per_rank == 469);
  REQUIRE(plan.num_batches() == 938);
  for (uint64_t b = 0; b < 936; ++b) REQUIRE(plan.batch_size(b) == 64);
  CHECK(plan.batch_size(936) == 48);
  CHECK(plan.batch_size(937) == 48);
}

TEST_CASE("impossible plans are rejected with the numbers") {
  Result<EpochPlan> zero_batch = MakeEpochPlan(100, 0, 2, 0, 0, true);
  CHECK(zero_batch.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(zero_batch.status().message(), Catch::Contains("batch_size 0"));

  Result<EpochPlan> zero_world = MakeEpochPlan(100, 8, 0, 0, 0, true);
  CHECK(zero_world.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(zero_world.status().message(), Catch::Contains("world_size 0"));

  // 3 samples cannot give each of 4 ranks a batch.
  Result<EpochPlan> few = MakeEpochPlan(3, 2, 4, 0, 0, true);
  CHECK(few.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(few.status().message(), Catch::Contains("num_samples 3"));
  CHECK_THAT(few.status().message(), Catch::Contains("needs at least 4"));
  CHECK(BatchesPerRank(3, 2, 4).status().code() == StatusCode::kInvalidArgument);

  CHECK(MakeEpochPlan(0, 2, 1, 0, 0, true).status().code() == StatusCode::kInvalidArgument);
  CHECK(BatchesPerRank(0, 2, 1).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ember::daemon
