#include "sdk/sync/ember_store.h"

#include <utility>

namespace ember::sdk {
namespace {

constexpr std::chrono::milliseconds kForever = std::chrono::hours(24);

std::chrono::milliseconds Effective(std::chrono::milliseconds timeout) {
  return timeout == c10d::Store::kNoTimeout ? kForever : timeout;
}

}  // namespace

EmberStore::EmberStore(Client& client, std::string job, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), client_(client), job_(std::move(job)) {}

c10::intrusive_ptr<c10d::Store> EmberStore::clone() {
  return c10::make_intrusive<EmberStore>(client_, job_, timeout_);
}

void EmberStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  Status status = client_.KvSet(job_, key, std::string(value.begin(), value.end()));
  TORCH_CHECK(status.ok(), "ember store (job '", job_, "'): set '", key, "': ",
              status.ToString());
}

std::vector<uint8_t> EmberStore::compareSet(const std::string& key,
                                            const std::vector<uint8_t>& /*current_value*/,
                                            const std::vector<uint8_t>& /*new_value*/) {
  TORCH_CHECK(false, "ember store (job '", job_, "'): compareSet '", key,
              "': not supported by the emberd coordinator store");
}

std::vector<uint8_t> EmberStore::get(const std::string& key) {
  Result<std::string> value = client_.KvGet(job_, key, Effective(timeout_));
  TORCH_CHECK(value.ok(), "ember store (job '", job_, "'): get '", key, "' (timeout ",
              timeout_.count(), " ms): ", value.status().ToString());
  return std::vector<uint8_t>(value->begin(), value->end());
}

int64_t EmberStore::add(const std::string& key, int64_t value) {
  Result<int64_t> sum = client_.KvAdd(job_, key, value);
  TORCH_CHECK(sum.ok(), "ember store (job '", job_, "'): add ", value, " to '", key, "': ",
              sum.status().ToString());
  return *sum;
}

bool EmberStore::deleteKey(const std::string& key) {
  Result<bool> deleted = client_.KvDelete(job_, key);
  TORCH_CHECK(deleted.ok(), "ember store (job '", job_, "'): delete '", key, "': ",
              deleted.status().ToString());
  return *deleted;
}

bool EmberStore::check(const std::vector<std::string>& keys) {
  Result<bool> present = client_.KvCheck(job_, keys);
  TORCH_CHECK(present.ok(), "ember store (job '", job_, "'): check ", keys.size(),
              " keys starting with '", keys.empty() ? std::string() : keys.front(), "': ",
              present.status().ToString());
  return *present;
}

int64_t EmberStore::getNumKeys() {
  TORCH_CHECK(false, "ember store (job '", job_,
              "'): getNumKeys is not supported by the emberd coordinator store");
}

void EmberStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void EmberStore::wait(const std::vector<std::string>& keys,
                      const std::chrono::milliseconds& timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + Effective(timeout);
  for (const std::string& key : keys) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    Result<std::string> value = client_.KvGet(job_, key, left);
    TORCH_CHECK(value.ok(), "ember store (job '", job_, "'): wait for '", key, "' (timeout ",
                timeout.count(), " ms): ", value.status().ToString());
  }
}

}  // namespace ember::sdk
