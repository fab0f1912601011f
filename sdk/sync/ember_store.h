// EmberStore: a c10d::Store over emberd's Coordinator key-value store, so Gloo and NCCL
// bootstrap through the daemon the trainer already talks to (no extra port).
#ifndef EMBER_SDK_SYNC_EMBER_STORE_H_
#define EMBER_SDK_SYNC_EMBER_STORE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ember/client.h"

namespace ember::sdk {

// Keys are scoped by `job` in the daemon. get() and wait() block until the keys exist,
// up to the store's timeout (c10d::Store::kNoTimeout waits a day). Errors throw
// c10::Error naming the job, the key and the daemon's message. getNumKeys() and
// compareSet() are not supported (they throw); Gloo and NCCL bootstrap do not use them.
//
// Does not own `client`, which must outlive the store and everything that holds it
// (a ProcessGroupGloo keeps its store). Thread-safe, as Client is.
class EmberStore final : public c10d::Store {
 public:
  EmberStore(Client& client, std::string job,
             std::chrono::milliseconds timeout = c10d::Store::kDefaultTimeout);

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key,
                                  const std::vector<uint8_t>& current_value,
                                  const std::vector<uint8_t>& new_value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Another store over the same client and job. It overrides c10d::Store::clone() in
  // LibTorch 2.x, where that is pure virtual; 1.13 has no clone(), hence no `override`.
  c10::intrusive_ptr<c10d::Store> clone();

  const std::string& job() const { return job_; }

 private:
  Client& client_;
  std::string job_;
};

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_EMBER_STORE_H_
