// ServiceFixture: a DaemonService over real subsystems (catalog, ledger, key-value store,
// segments, stream manager) whose state lives in a fresh directory under $TEST_TMPDIR, and
// a small "tokens" dataset file to register. For daemon/service tests only.
#ifndef EMBER_DAEMON_SERVICE_SERVICE_TESTING_H_
#define EMBER_DAEMON_SERVICE_SERVICE_TESTING_H_

#include <memory>
#include <string>

#include <boost/asio/thread_pool.hpp>

#include "common/env.h"
#include "daemon/service/daemon_service.h"

namespace ember::daemon {

class ServiceFixture {
 public:
  static constexpr const char* kVersion = "test-version";
  static constexpr uint32_t kPid = 4242;
  static constexpr uint64_t kTokensSamples = 15;  // the dataset of TokensSpec

  // State in $TEST_TMPDIR/<name> (emptied first).
  explicit ServiceFixture(const std::string& name, UserLimits user_limits = {});
  ~ServiceFixture();

  DaemonService& service() { return *service_; }
  KvStore& kv() { return kv_; }
  boost::asio::thread_pool& blocking() { return blocking_; }  // one thread
  StreamManager& streams() { return *streams_; }

  // A tokens dataset called `dataset`: 64 uint16 tokens in windows of 4 (15 samples).
  DatasetSpec TokensSpec(const std::string& dataset) const;

  // Principals: root, and users of uid 1001, 1002, ... (no share group).
  static Principal Root();
  static Principal User(uid_t uid);

  // DaemonService::AddDataset / RemoveDataset, waiting for their completion.
  Result<DatasetInfo> AddDataset(const DatasetSpec& spec, const DatasetOwner& owner = {Root(), {}});
  Status RemoveDataset(const std::string& dataset, const Principal& caller = Root());

  // Waits up to 5 s for the ring memory in use to fall to 0 (closed streams return theirs
  // once their producers have stopped); false if it did not.
  bool RingMemoryReleased();

  // Stream params for `rank` of 2 ranks of `job` reading `dataset` in batches of 2.
  static StreamParams StreamOf(const std::string& job, const std::string& dataset,
                               uint32_t rank);

 private:
  std::unique_ptr<Env> env_;
  std::string dir_;
  std::unique_ptr<Catalog> catalog_;
  JobLedger ledger_;
  KvStore kv_;
  std::unique_ptr<SharedSegments> segments_;
  std::unique_ptr<DatasetCache> cache_;
  std::unique_ptr<DecodePool> decode_pool_;
  boost::asio::thread_pool blocking_{1};
  std::unique_ptr<StreamManager> streams_;
  std::unique_ptr<DaemonService> service_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_SERVICE_SERVICE_TESTING_H_
