// A trainer's Loader survives its emberd being killed and restarted (as systemd does) on
// the same socket and state dir: it reconnects with backoff and goes on after the batches
// it already received, so every sample is still read exactly once per epoch. A daemon that
// never comes back ends the wait at the deadline with an error naming the socket.
// LibTorch first: its glog CHECK must not shadow Catch2's.
#include "ember/loader.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

std::vector<int64_t> Ids(const Batch& batch) {
  const torch::Tensor ids = batch.at("sample_id");
  return std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
}

TEST_CASE("emberd killed and restarted mid-epoch: the Loader carries on, exactly once") {
  Daemon daemon;
  constexpr uint32_t kSamples = 300;
  auto client = StartWithSyntheticDataset(daemon, kSamples);
  StreamOptions options = ReaderOptions("survive-restart", 10, 2);
  options.sample_ids = true;
  options.slots = 3;
  Loader loader(*client, options, std::nullopt, std::chrono::seconds(30));

  std::vector<std::vector<int64_t>> seen(2);
  for (int i = 0; i < 7; ++i) {
    std::optional<Batch> batch = loader.Next();
    REQUIRE(batch.has_value());
    const auto ids = Ids(*batch);
    seen[0].insert(seen[0].end(), ids.begin(), ids.end());
  }
  daemon.Kill();
  // Restarted a little later, as systemd's RestartSec would.
  std::thread restart([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    daemon.Start();
  });
  for (int epoch = 0; epoch < 2; ++epoch) {
    while (std::optional<Batch> batch = loader.Next()) {
      CHECK(batch->epoch == static_cast<uint64_t>(epoch));
      const auto ids = Ids(*batch);
      seen[epoch].insert(seen[epoch].end(), ids.begin(), ids.end());
    }
  }
  restart.join();
  CHECK(loader.reconnects() == 1);
  std::vector<int64_t> expected(kSamples);
  std::iota(expected.begin(), expected.end(), 0);
  for (auto& ids : seen) {
    std::sort(ids.begin(), ids.end());
    CHECK(ids == expected);
  }
}

TEST_CASE("a daemon that does not come back ends the wait at the deadline, naming it") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 100);
  Loader loader(*client, ReaderOptions("no-return", 10, 1), std::nullopt,
                std::chrono::seconds(2));
  REQUIRE(loader.Next().has_value());
  daemon.Kill();
  const auto start = std::chrono::steady_clock::now();
  try {
    while (loader.Next()) {
    }
    FAIL("Next returned without the daemon");
  } catch (const c10::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("gave up reconnecting"));
    CHECK_THAT(e.what(), Catch::Contains(daemon.socket()));
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

}  // namespace
}  // namespace ember::testing
