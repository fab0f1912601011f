// Through a real emberd: every sample exactly once per epoch across the ranks of a job,
// the same number of batches for every rank, deterministic order per (seed, epoch), and
// clear errors for bad stream requests.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <thread>

#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

struct RankLog {
  std::vector<std::vector<uint32_t>> ids_by_epoch;  // in delivery order
  std::vector<uint64_t> batches_by_epoch;
  Status error;
};

RankLog ReadAll(Client& client, const StreamOptions& options) {
  RankLog log;
  auto reader = client.OpenStream(options);
  if (!reader.ok()) {
    log.error = reader.status();
    return log;
  }
  for (uint32_t e = 0; e < options.epochs; ++e) {
    log.ids_by_epoch.emplace_back();
    log.batches_by_epoch.push_back(0);
    while (true) {
      auto next = (*reader)->Next();
      if (!next.ok()) {
        log.error = next.status();
        return log;
      }
      if (!next->has_value()) break;
      const RawBatch& b = **next;
      if (b.epoch != e) {
        log.error = Internal("batch of epoch " + std::to_string(b.epoch) + " during epoch " +
                             std::to_string(e));
        return log;
      }
      const RawTensor& image = b.tensors.at(0);
      const uint64_t sample_bytes = image.nbytes / b.num_samples;
      for (uint32_t i = 0; i < b.num_samples; ++i)
        log.ids_by_epoch.back().push_back(
            SyntheticId(static_cast<const uint8_t*>(image.data) + i * sample_bytes));
      const auto* labels = static_cast<const uint8_t*>(b.tensors.at(1).data);
      for (uint32_t i = 0; i < b.num_samples; ++i)
        if (labels[i] != log.ids_by_epoch.back()[log.ids_by_epoch.back().size() - b.num_samples + i] % 10)
          log.error = DataLoss("label does not match its image");
      ++log.batches_by_epoch.back();
    }
  }
  auto after = (*reader)->Next();
  if (!after.ok() || after->has_value() || !(*reader)->ended())
    log.error = Internal("stream did not end after its epochs");
  return log;
}

TEST_CASE("two ranks of a job see every sample exactly once per epoch") {
  const uint32_t kSamples = 1000;  // 1000 / (64 * 2) -> 8 batches per rank, last ones short
  Daemon daemon;
  {
    auto admin = StartWithSyntheticDataset(daemon, kSamples);

    std::vector<RankLog> logs(2);
    std::vector<std::thread> ranks;
    for (uint32_t r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        auto client = daemon.Connect();
        StreamOptions options = ReaderOptions("exactly-once", 64, 3);
        options.seed = 7;
        options.rank = r;
        options.world_size = 2;
        logs[r] = ReadAll(*client, options);
      });
    for (auto& t : ranks) t.join();

    for (uint32_t r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << logs[r].error.ToString());
      REQUIRE(logs[r].error.ok());
      REQUIRE(logs[r].batches_by_epoch == std::vector<uint64_t>{8, 8, 8});
    }
    for (uint32_t e = 0; e < 3; ++e) {
      std::multiset<uint32_t> seen(logs[0].ids_by_epoch[e].begin(), logs[0].ids_by_epoch[e].end());
      seen.insert(logs[1].ids_by_epoch[e].begin(), logs[1].ids_by_epoch[e].end());
      std::set<uint32_t> unique(seen.begin(), seen.end());
      INFO("epoch " << e << ": rank 0 got " << logs[0].ids_by_epoch[e].size() << ", rank 1 got "
                    << logs[1].ids_by_epoch[e].size() << " samples, " << unique.size()
                    << " distinct");
      REQUIRE(seen.size() == kSamples);
      CHECK(unique.size() == kSamples);
      CHECK(*unique.rbegin() == kSamples - 1);
    }
    // Shuffled: epochs differ in order.
    CHECK(logs[0].ids_by_epoch[0] != logs[0].ids_by_epoch[1]);
  }
  daemon.Stop();
}

TEST_CASE("one rank without shuffle reads the dataset in order, and a rerun is identical") {
  Daemon daemon;
  {
    auto client = StartWithSyntheticDataset(daemon, 130);
    StreamOptions options = ReaderOptions("ordered", 32, 1);
    options.shuffle = false;
    RankLog log = ReadAll(*client, options);
    REQUIRE(log.error.ok());
    std::vector<uint32_t> expected(130);
    for (uint32_t i = 0; i < 130; ++i) expected[i] = i;
    CHECK(log.ids_by_epoch[0] == expected);
    CHECK(log.batches_by_epoch[0] == 5);

    options.shuffle = true;
    options.seed = 3;
    options.job = "shuffled-a";
    RankLog a = ReadAll(*client, options);
    options.job = "shuffled-b";
    RankLog b = ReadAll(*client, options);
    REQUIRE(a.error.ok());
    REQUIRE(b.error.ok());
    CHECK(a.ids_by_epoch == b.ids_by_epoch);
    CHECK(a.ids_by_epoch[0] != expected);
  }
  daemon.Stop();
}

TEST_CASE("bad stream requests fail with a message naming the field") {
  Daemon daemon;
  {
    auto client = StartWithSyntheticDataset(daemon, 100);
    StreamOptions options = ReaderOptions("bad", 64, 1, "nope");
    auto r = client->OpenStream(options);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kNotFound);
    CHECK(r.status().message().find("nope") != std::string::npos);

    options.dataset = "syn";
    options.batch_size = 0;
    r = client->OpenStream(options);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("batch_size") != std::string::npos);

    options.batch_size = 8;
    options.rank = 2;
    options.world_size = 2;
    r = client->OpenStream(options);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("rank") != std::string::npos);

    // Ranks of one job must agree.
    options.rank = 0;
    auto first = client->OpenStream(options);
    REQUIRE(first.ok());
    options.rank = 1;
    options.batch_size = 16;
    r = client->OpenStream(options);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("batch_size") != std::string::npos);
  }
  daemon.Stop();
}

TEST_CASE("data that went bad after registration fails that stream, not the daemon") {
  Daemon daemon;
  auto client = StartWithSyntheticDataset(daemon, 300);
  const std::string other = daemon.dir() + "/other";
  REQUIRE(mkdir(other.c_str(), 0755) == 0);
  WriteSyntheticIdx(other, "train", 300);
  REQUIRE(client->AddDataset({"doomed", "idx", other, "train"}).ok());
  // The file is cut short behind the daemon's back.
  const std::string images = other + "/train-images-idx3-ubyte.gz";
  REQUIRE(truncate(images.c_str(), 100) == 0);

  auto doomed = client->OpenStream(ReaderOptions("doomed-job", 16, 1, "doomed"));
  REQUIRE(doomed.ok());
  auto next = (*doomed)->Next();
  REQUIRE_FALSE(next.ok());
  CHECK(next.status().code() == StatusCode::kDataLoss);
  CHECK(next.status().message().find(images) != std::string::npos);

  // The daemon and the healthy dataset carry on.
  auto healthy = client->OpenStream(ReaderOptions("healthy-job", 16, 1));
  REQUIRE(healthy.ok());
  auto batch = (*healthy)->Next();
  REQUIRE(batch.ok());
  CHECK(batch->has_value());
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
