#include "daemon/coordinator/epoch_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
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

// The sizes of every batch, step by step, rank by rank.
std::vector<uint64_t> Sizes(const StepLayout& layout) {
  std::vector<uint64_t> sizes;
  for (uint64_t s = 0; s < layout.steps(); ++s)
    for (uint32_t r = 0; r < layout.world_size; ++r) sizes.push_back(layout.Slice(s, r).size());
  return sizes;
}

StepLayout MustLayout(uint64_t n, uint32_t batch, uint32_t world, uint64_t start = 0) {
  Result<StepLayout> layout = MakeStepLayout(n, batch, world, start);
  INFO(layout.status().ToString());
  REQUIRE(layout.ok());
  return std::move(layout).value();
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

TEST_CASE("shuffled by shards: windows of whole shards, each once, a function of (seed, epoch)") {
  // 21 shards of uneven sizes (0 to 96 samples), 1003 samples in all.
  std::vector<uint64_t> starts = {0};
  for (uint64_t s = 0; s < 21; ++s) starts.push_back(starts.back() + (s * 37) % 97);
  const uint64_t n = starts.back();
  auto shard_of = [&](uint64_t id) {
    return static_cast<uint64_t>(std::upper_bound(starts.begin(), starts.end(), id) - starts.begin() - 1);
  };
  for (uint32_t window : {1u, 4u, 21u, 30u}) {
    const ShuffleShape shape = ShuffleShape::ByShards(starts, window);
    std::vector<uint64_t> order;
    MakeEpochOrder(n, 9, 2, /*shuffle=*/true, &order, shape);
    std::vector<uint64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint64_t> all(n);
    std::iota(all.begin(), all.end(), uint64_t{0});
    REQUIRE(sorted == all);
    // A shard's samples lie in one window: at any position, at most `window` shards are
    // between their first and last sample.
    std::vector<uint64_t> first(21, n), last(21, 0);
    for (uint64_t p = 0; p < n; ++p) {
      const uint64_t s = shard_of(order[p]);
      first[s] = std::min(first[s], p);
      last[s] = std::max(last[s], p);
    }
    for (uint64_t p = 0; p < n; ++p) {
      uint64_t open = 0;
      for (uint64_t s = 0; s < 21; ++s) open += first[s] <= p && p <= last[s];
      CHECK(open <= window);
    }
    std::vector<uint64_t> again, next_epoch, other_seed;
    MakeEpochOrder(n, 9, 2, true, &again, shape);
    MakeEpochOrder(n, 9, 3, true, &next_epoch, shape);
    MakeEpochOrder(n, 10, 2, true, &other_seed, shape);
    CHECK(again == order);
    CHECK(next_epoch != order);
    CHECK(other_seed != order);
  }
  // Within a window the samples are mixed.
  std::vector<uint64_t> order;
  MakeEpochOrder(n, 9, 2, true, &order, ShuffleShape::ByShards(starts, 4));
  std::vector<uint64_t> first_window(order.begin(), order.begin() + 100);
  CHECK_FALSE(std::is_sorted(first_window.begin(), first_window.end()));
  // One shard, or none, is the shuffle over the whole set; the digest tells blocks apart.
  std::vector<uint64_t> whole, one;
  MakeEpochOrder(n, 9, 2, true, &whole);
  MakeEpochOrder(n, 9, 2, true, &one, ShuffleShape::ByShards({0, n}, 4));
  CHECK(whole == one);
  CHECK(ShuffleShape::ByShards(starts, 4) != ShuffleShape::ByShards({0, 5, n}, 4));
  CHECK(ShuffleShape::ByShards(starts, 4) == ShuffleShape::ByShards(starts, 4));
  CHECK_FALSE(ShuffleShape().by_shards());
}

TEST_CASE("shuffled by shards, a step is grouped by shard before it is cut: a node's ranks read fewer shards") {
  // 40 shards of 25 samples, windows of 8: a step of 64 holds about 8 shards' samples.
  std::vector<uint64_t> starts;
  for (uint64_t s = 0; s <= 40; ++s) starts.push_back(25 * s);
  const ShuffleShape shape = ShuffleShape::ByShards(starts, 8);
  const Result<EpochPlan> plan = MakeEpochPlan(1000, 16, 4, 3, 1, true, 0, shape);
  REQUIRE(plan.ok());
  // Nodes of 2 ranks: ranks 0-1 and 2-3. Grouped, each node reads about half the shards of
  // a step; cut as they come, each reads nearly all of them.
  auto shards_of = [](const std::vector<uint64_t>& ids) {
    std::set<uint64_t> shards;
    for (uint64_t id : ids) shards.insert(id / 25);
    return shards;
  };
  uint64_t grouped = 0, ungrouped = 0, in_steps = 0;
  for (uint64_t step = 0; step < plan->steps(); ++step) {
    std::vector<uint64_t> all;
    for (uint32_t node = 0; node < 2; ++node) {
      std::vector<uint64_t> ids, plain;
      for (uint32_t rank = 2 * node; rank < 2 * node + 2; ++rank) {
        const std::vector<uint64_t> r = plan->RankIds(step, rank, shape);
        ids.insert(ids.end(), r.begin(), r.end());
        const PositionRange slice = plan->Slice(step, rank);
        plain.insert(plain.end(), plan->ids(slice), plan->ids(slice) + slice.size());
      }
      grouped += shards_of(ids).size();
      ungrouped += shards_of(plain).size();
      all.insert(all.end(), ids.begin(), ids.end());
    }
    in_steps += shards_of(all).size();
    // The same samples in the step, each once, grouped or not.
    std::vector<uint64_t> plain(plan->order.begin() + plan->layout.step_starts[step],
                                plan->order.begin() + plan->layout.step_starts[step + 1]);
    std::sort(all.begin(), all.end());
    std::sort(plain.begin(), plain.end());
    CHECK(all == plain);
  }
  // Grouped, the nodes share at most the one shard their cut falls in; cut as they come,
  // each node reads most of the step's shards.
  CHECK(grouped <= in_steps + plan->steps());
  CHECK(2 * ungrouped > 3 * in_steps);
  // Without blocks, the step is left as it is.
  std::vector<uint64_t> ids = {5, 3, 9};
  GroupByShard(ids, ShuffleShape());
  CHECK(ids == std::vector<uint64_t>{5, 3, 9});
  GroupByShard(ids, ShuffleShape::ByShards({0, 4, 8, 12}, 2));
  CHECK(ids == std::vector<uint64_t>{3, 5, 9});
}

TEST_CASE("the 32-bit order is the plan's order") {
  for (bool shuffle : {true, false}) {
    std::vector<uint32_t> narrow;
    MakeEpochOrder(1000, 7, 3, shuffle, &narrow);
    const EpochPlan plan = MustPlan(1000, 4, 2, 7, 3, shuffle);
    CHECK(std::vector<uint64_t>(narrow.begin(), narrow.end()) == plan.order);
  }
}

TEST_CASE("the same (seed, epoch) gives the same plan") {
  const EpochPlan a = MustPlan(5000, 32, 3, 42, 7);
  const EpochPlan b = MustPlan(5000, 32, 3, 42, 7);
  CHECK(a.order == b.order);
  CHECK(a.layout.step_starts == b.layout.step_starts);
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
    REQUIRE(plan.layout.step_starts.front() == 0);
    REQUIRE(plan.layout.step_starts.back() == 10007);
    std::vector<uint64_t> seen;
    for (uint64_t s = 0; s < plan.steps(); ++s) {
      for (uint32_t r = 0; r < 3; ++r) {
        const PositionRange slice = plan.Slice(s, r);
        seen.insert(seen.end(), plan.ids(slice), plan.ids(slice) + slice.size());
      }
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

TEST_CASE("steps, slices and the tail follow the rules for every small shape and start") {
  for (uint64_t n = 1; n <= 70; ++n) {
    for (uint32_t batch = 1; batch <= 7; ++batch) {
      for (uint32_t world = 1; world <= 4; ++world) {
        for (uint64_t start = 0; start < n; start += 1 + n / 5) {
          INFO("n " << n << " batch " << batch << " world " << world << " start " << start);
          const uint64_t global = uint64_t{batch} * world, remaining = n - start;
          const uint64_t steps = (remaining + global - 1) / global, tail = remaining % global;
          // The step sizes the rule gives.
          std::vector<uint64_t> expected(steps, global);
          if (tail != 0 && (tail >= global / 2 || steps == 1)) {
            expected.back() = tail;
          } else if (tail != 0) {
            expected[steps - 2] = global + tail - (global + tail) / 2;
            expected[steps - 1] = (global + tail) / 2;
          }
          const bool possible =
              *std::min_element(expected.begin(), expected.end()) >= uint64_t{world};
          Result<StepLayout> layout = MakeStepLayout(n, batch, world, start);
          if (!possible) {
            CHECK(layout.status().code() == StatusCode::kInvalidArgument);
            continue;
          }
          REQUIRE(layout.ok());
          REQUIRE(layout->steps() == steps);
          CHECK(layout->step_starts.front() == start);
          CHECK(layout->step_starts.back() == n);
          uint64_t next = start;
          for (uint64_t s = 0; s < steps; ++s) {
            CHECK(layout->step_starts[s + 1] - layout->step_starts[s] == expected[s]);
            uint64_t smallest = UINT64_MAX, largest = 0;
            for (uint32_t r = 0; r < world; ++r) {
              const PositionRange slice = layout->Slice(s, r);
              CHECK(slice.begin == next);  // slices tile the step in rank order
              next = slice.end;
              smallest = std::min(smallest, slice.size());
              largest = std::max(largest, slice.size());
            }
            CHECK(smallest >= 1);
            CHECK(largest <= batch);
            CHECK(largest - smallest <= 1);
          }
          CHECK(next == n);
        }
      }
    }
  }
}

TEST_CASE("the tail: a last step of at least G / 2, else the last two steps share") {
  // 10 samples, G = 3 x 2: one full step, then 4 >= 3 samples in the last.
  CHECK(Sizes(MustLayout(10, 3, 2)) == std::vector<uint64_t>{3, 3, 2, 2});
  // 13 samples, G = 6: 6, 6, then 1 < 3: the last two steps share 7 as 4 + 3.
  CHECK(Sizes(MustLayout(13, 3, 2)) == std::vector<uint64_t>{3, 3, 2, 2, 2, 1});
  // One step only: it takes what there is.
  CHECK(Sizes(MustLayout(10, 4, 4)) == std::vector<uint64_t>{3, 3, 2, 2});
}

TEST_CASE("runs with the same global batch see the same steps whatever their world size") {
  for (uint64_t n : {1000, 1001, 1023, 1090, 60000}) {
    for (uint64_t start : {0, 7, 500}) {
      const StepLayout four = MustLayout(n, 32, 4, start);
      const StepLayout two = MustLayout(n, 64, 2, start);
      const StepLayout one = MustLayout(n, 128, 1, start);
      CHECK(four.step_starts == two.step_starts);
      CHECK(two.step_starts == one.step_starts);
    }
  }
}

TEST_CASE("a resumed epoch serves exactly the positions not yet consumed, on any world size") {
  const EpochPlan before = MustPlan(1000, 16, 2, 5, 3);
  for (uint64_t consumed_steps : {1, 10, 30}) {
    const uint64_t start = before.layout.step_starts[consumed_steps];
    for (uint32_t world : {1, 3, 4}) {
      INFO("after " << consumed_steps << " steps, world " << world);
      Result<EpochPlan> after = MakeEpochPlan(1000, 8, world, 5, 3, true, start);
      REQUIRE(after.ok());
      CHECK(after->order == before.order);
      std::vector<uint64_t> seen(before.order.begin(), before.order.begin() + start);
      for (uint64_t s = 0; s < after->steps(); ++s)
        for (uint32_t r = 0; r < world; ++r) {
          const PositionRange slice = after->Slice(s, r);
          seen.insert(seen.end(), after->ids(slice), after->ids(slice) + slice.size());
        }
      std::sort(seen.begin(), seen.end());
      CHECK(seen == Iota(1000));
    }
  }
}

TEST_CASE("Fashion-MNIST train split, batch 64, 2 ranks: 469 batches per rank") {
  const StepLayout layout = MustLayout(60000, 64, 2);
  REQUIRE(layout.steps() == 469);
  for (uint64_t s = 0; s < 468; ++s)
    for (uint32_t r = 0; r < 2; ++r) REQUIRE(layout.Slice(s, r).size() == 64);
  CHECK(layout.Slice(468, 0).size() == 48);
  CHECK(layout.Slice(468, 1).size() == 48);
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
  CHECK_THAT(few.status().message(), Catch::Contains("3 samples for 4 ranks"));

  // Batch size 1 cannot split a tail of 1 sample over 2 ranks.
  Result<StepLayout> odd = MakeStepLayout(5, 1, 2);
  CHECK(odd.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(odd.status().message(), Catch::Contains("batch_size of at least 2"));

  CHECK(MakeEpochPlan(0, 2, 1, 0, 0, true).status().code() == StatusCode::kInvalidArgument);
  Result<StepLayout> done = MakeStepLayout(100, 2, 1, 100);
  CHECK(done.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(done.status().message(), Catch::Contains("start 100"));
}

}  // namespace
}  // namespace ember::daemon
