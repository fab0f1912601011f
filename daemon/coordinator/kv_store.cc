#include "daemon/coordinator/kv_store.h"

#include <charconv>
#include <utility>

namespace ember::daemon {
namespace {

std::string Where(const std::string& job, const std::string& what, const std::string& name) {
  return "job '" + job + "': " + what + " '" + name + "'";
}

}  // namespace

void KvStore::Set(const std::string& job, const std::string& key, std::string value) {
  values_[job][key] = std::move(value);
  FireGetters(job, key);
}

std::optional<KvStore::WaiterId> KvStore::Get(const std::string& job, const std::string& key,
                                              ValueCallback on_value) {
  auto jit = values_.find(job);
  if (jit != values_.end()) {
    auto kit = jit->second.find(key);
    if (kit != jit->second.end()) {
      const std::string value = kit->second;  // the callback may change the store
      on_value(value);
      return std::nullopt;
    }
  }
  const WaiterId id = next_id_++;
  Waiter waiter;
  waiter.job = job;
  waiter.key = key;
  waiter.on_value = std::move(on_value);
  waiters_.emplace(id, std::move(waiter));
  return id;
}

Result<int64_t> KvStore::Add(const std::string& job, const std::string& key, int64_t delta) {
  int64_t current = 0;
  auto jit = values_.find(job);
  if (jit != values_.end()) {
    auto kit = jit->second.find(key);
    if (kit != jit->second.end()) {
      const std::string& stored = kit->second;
      const char* end = stored.data() + stored.size();
      auto [ptr, ec] = std::from_chars(stored.data(), end, current);
      if (stored.empty() || ec != std::errc() || ptr != end) {
        return InvalidArgument(Where(job, "key", key) + ": value '" + stored +
                               "' is not a decimal int64");
      }
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return InvalidArgument(Where(job, "key", key) + ": " + std::to_string(current) + " + " +
                           std::to_string(delta) + " overflows int64");
  }
  values_[job][key] = std::to_string(sum);
  FireGetters(job, key);
  return sum;
}

bool KvStore::Check(const std::string& job, const std::vector<std::string>& keys) const {
  auto jit = values_.find(job);
  for (const std::string& key : keys) {
    if (jit == values_.end() || jit->second.count(key) == 0) return false;
  }
  return true;
}

bool KvStore::Delete(const std::string& job, const std::string& key) {
  auto jit = values_.find(job);
  if (jit == values_.end()) return false;
  const bool erased = jit->second.erase(key) > 0;
  if (jit->second.empty()) values_.erase(jit);
  return erased;
}

Result<std::optional<KvStore::WaiterId>> KvStore::Arrive(const std::string& job,
                                                         const std::string& name,
                                                         uint32_t world_size,
                                                         DoneCallback on_done) {
  if (world_size == 0) {
    return InvalidArgument(Where(job, "barrier", name) + ": world_size must be positive");
  }
  auto bit = barriers_.find({job, name});
  if (bit != barriers_.end() && bit->second.world_size != world_size) {
    return InvalidArgument(Where(job, "barrier", name) + " was opened with world_size " +
                           std::to_string(bit->second.world_size) + ", this arrival has " +
                           std::to_string(world_size));
  }
  const size_t arrived = bit == barriers_.end() ? 0 : bit->second.arrived.size();
  if (arrived + 1 < world_size) {
    if (bit == barriers_.end()) {
      bit = barriers_.emplace(std::make_pair(job, name), Barrier{}).first;
      bit->second.world_size = world_size;
    }
    const WaiterId id = next_id_++;
    Waiter waiter;
    waiter.job = job;
    waiter.key = name;
    waiter.barrier = true;
    waiter.on_done = std::move(on_done);
    waiters_.emplace(id, std::move(waiter));
    bit->second.arrived.push_back(id);
    return std::optional<WaiterId>(id);
  }

  // The last arrival: reset the barrier before running callbacks, which may arrive again.
  std::vector<DoneCallback> done;
  if (bit != barriers_.end()) {
    for (WaiterId id : bit->second.arrived) {
      auto wit = waiters_.find(id);
      done.push_back(std::move(wit->second.on_done));
      waiters_.erase(wit);
    }
    barriers_.erase(bit);
  }
  done.push_back(std::move(on_done));
  for (DoneCallback& callback : done) callback();
  return std::optional<WaiterId>();
}

void KvStore::CancelWaiter(WaiterId id) {
  auto wit = waiters_.find(id);
  if (wit == waiters_.end()) return;
  if (wit->second.barrier) {
    auto bit = barriers_.find({wit->second.job, wit->second.key});
    if (bit != barriers_.end()) {
      std::vector<WaiterId>& arrived = bit->second.arrived;
      for (auto it = arrived.begin(); it != arrived.end(); ++it) {
        if (*it == id) {
          arrived.erase(it);
          break;
        }
      }
      if (arrived.empty()) barriers_.erase(bit);
    }
  }
  waiters_.erase(wit);
}

void KvStore::DropJob(const std::string& job) {
  values_.erase(job);
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    it = it->second.job == job ? waiters_.erase(it) : std::next(it);
  }
  auto bit = barriers_.lower_bound({job, std::string()});
  while (bit != barriers_.end() && bit->first.first == job) bit = barriers_.erase(bit);
}

size_t KvStore::NumKeys(const std::string& job) const {
  auto jit = values_.find(job);
  return jit == values_.end() ? 0 : jit->second.size();
}

void KvStore::FireGetters(const std::string& job, const std::string& key) {
  std::vector<ValueCallback> ready;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (!it->second.barrier && it->second.job == job && it->second.key == key) {
      ready.push_back(std::move(it->second.on_value));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  if (ready.empty()) return;
  // Callbacks may change the store: hand each the value as it was set.
  const std::string value = values_[job][key];
  for (ValueCallback& callback : ready) callback(value);
}

}  // namespace ember::daemon
