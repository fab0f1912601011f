#include "daemon/service/service_testing.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <thread>
#include <vector>

#include "common/temp_dir_testing.h"
#include "daemon/data/dataset_cache.h"
#include "daemon/data/formats.h"

namespace ember::daemon {

ServiceFixture::ServiceFixture(const std::string& name, UserLimits user_limits)
    : env_(NewPosixEnv()) {
  dir_ = FreshTestDir("service/" + name);
  REQUIRE(env_->CreateDirs(dir_ + "/state").ok());
  std::vector<uint16_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i);
  WriteTestFile(dir_ + "/tokens.bin", std::string(reinterpret_cast<const char*>(tokens.data()),
                                                  tokens.size() * sizeof(uint16_t)));
  Env* env = env_.get();
  auto catalog = Catalog::Open(env, dir_ + "/state",
                               [env](const DatasetSpec& spec, const DatasetOwner& owner,
                                     IndexingProgress* progress) {
                                 FormatDeps deps;
                                 deps.progress = progress;
                                 return ProbeDatasetAs(env, spec, owner.reads_as, deps);
                               });
  REQUIRE(catalog.ok());
  catalog_ = std::move(*catalog);
  segments_ = std::make_unique<SharedSegments>(env);
  cache_ = std::make_unique<DatasetCache>(env, 1);
  decode_pool_ = std::make_unique<DecodePool>(1);
  streams_ = std::make_unique<StreamManager>(env, catalog_.get(), &ledger_, cache_.get(),
                                             decode_pool_.get(), StreamLimits{});
  ServiceDeps deps;
  deps.env = env;
  deps.user_limits = user_limits;
  deps.catalog = catalog_.get();
  deps.streams = streams_.get();
  deps.ledger = &ledger_;
  deps.kv = &kv_;
  deps.segments = segments_.get();
  deps.blocking = &blocking_;
  deps.version = kVersion;
  deps.pid = kPid;
  service_ = std::make_unique<DaemonService>(std::move(deps));
}

ServiceFixture::~ServiceFixture() {
  service_.reset();
  streams_.reset();
  blocking_.join();
}

DatasetSpec ServiceFixture::TokensSpec(const std::string& dataset) const {
  DatasetSpec spec;
  spec.name = dataset;
  spec.format = "tokens";
  spec.path = dir_ + "/tokens.bin";
  spec.split = "train";
  spec.pipeline = "tokens: {seq_len: 4}";
  return spec;
}

Principal ServiceFixture::Root() { return AccessPolicy(0, std::nullopt).Identify(Credentials{0, 0, {}}); }

Principal ServiceFixture::User(uid_t uid) {
  return AccessPolicy(0, std::nullopt).Identify(Credentials{uid, uid, {}});
}

Result<DatasetInfo> ServiceFixture::AddDataset(const DatasetSpec& spec, const DatasetOwner& owner) {
  std::promise<Result<DatasetInfo>> added;
  service_->AddDataset(spec, owner, [&added](Result<DatasetInfo> info) { added.set_value(std::move(info)); });
  return added.get_future().get();
}

bool ServiceFixture::RingMemoryReleased() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (streams_->shm_bytes_in_use() != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

Status ServiceFixture::RemoveDataset(const std::string& dataset, const Principal& caller) {
  std::promise<Status> removed;
  service_->RemoveDataset(caller, dataset, [&removed](Status s) { removed.set_value(std::move(s)); });
  return removed.get_future().get();
}

StreamParams ServiceFixture::StreamOf(const std::string& job, const std::string& dataset,
                                      uint32_t rank) {
  StreamParams params;
  params.job = job;
  params.dataset = dataset;
  params.batch_size = 2;
  params.rank = rank;
  params.world_size = 2;
  params.epochs = 1;
  params.owner = Root();
  return params;
}

}  // namespace ember::daemon
