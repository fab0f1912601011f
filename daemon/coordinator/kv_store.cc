#include "daemon/coordinator/kv_store.h"

#include <algorithm>
#include <charconv>
#include <utility>

namespace ember::daemon {
namespace {

std::string Where(const std::string& job, const std::string& what, const std::string& name) {
  return "job '" + job + "': " + what + " '" + name + "'";
}

}  // namespace

Status KvStore::CheckStore(const std::string& job, const std::string& key,
                           size_t value_bytes) const {
  if (key.size() > limits_.max_key_bytes)
    return ResourceExhausted("job '" + job + "': a key of " + std::to_string(key.size()) +
                             " bytes is over the limit of " +
                             std::to_string(limits_.max_key_bytes));
  if (value_bytes > limits_.max_value_bytes)
    return ResourceExhausted(Where(job, "key", key) + ": a value of " +
                             std::to_string(value_bytes) + " bytes is over the limit of " +
                             std::to_string(limits_.max_value_bytes));
  size_t old_bytes = 0, keys = 0, bytes = 0;
  auto jit = values_.find(job);
  if (jit != values_.end()) {
    keys = jit->second.size();
    auto kit = jit->second.find(key);
    if (kit != jit->second.end()) old_bytes = key.size() + kit->second.size();
    else if (keys >= limits_.max_job_keys)
      return ResourceExhausted("job '" + job + "' holds " + std::to_string(keys) +
                               " keys, the limit");
  }
  auto uit = usage_.find(job);
  if (uit != usage_.end()) bytes = uit->second.bytes;
  if (bytes - old_bytes + key.size() + value_bytes > limits_.max_job_bytes)
    return ResourceExhausted(Where(job, "key", key) + ": the job's keys and values would take " +
                             std::to_string(bytes - old_bytes + key.size() + value_bytes) +
                             " bytes, over the limit of " + std::to_string(limits_.max_job_bytes));
  return Status::Ok();
}

Status KvStore::CheckWaiter(const std::string& job, const std::string& what,
                            const std::string& name) const {
  if (name.size() > limits_.max_key_bytes)
    return ResourceExhausted("job '" + job + "': a " + what + " name of " +
                             std::to_string(name.size()) + " bytes is over the limit of " +
                             std::to_string(limits_.max_key_bytes));
  auto uit = usage_.find(job);
  if (uit != usage_.end() && uit->second.waiters >= limits_.max_job_waiters)
    return ResourceExhausted(Where(job, what, name) + ": the job has " +
                             std::to_string(uit->second.waiters) +
                             " waits pending, the limit");
  return Status::Ok();
}

void KvStore::Store(const std::string& job, const std::string& key, std::string value) {
  Usage& usage = usage_[job];
  auto [it, added] = values_[job].try_emplace(key);
  if (!added) usage.bytes -= key.size() + it->second.size();
  usage.bytes += key.size() + value.size();
  it->second = std::move(value);
}

void KvStore::AddWaiter(WaiterId id, Waiter waiter) {
  ++usage_[waiter.job].waiters;
  waiters_.emplace(id, std::move(waiter));
}

std::map<KvStore::WaiterId, KvStore::Waiter>::iterator KvStore::EraseWaiter(
    std::map<WaiterId, Waiter>::iterator it) {
  auto uit = usage_.find(it->second.job);
  if (uit != usage_.end() && uit->second.waiters > 0) --uit->second.waiters;
  return waiters_.erase(it);
}

Status KvStore::Set(const std::string& job, const std::string& key, std::string value) {
  EMBER_RETURN_IF_ERROR(CheckStore(job, key, value.size()));
  Store(job, key, std::move(value));
  FireGetters(job, key);
  return Status::Ok();
}

Result<std::optional<KvStore::WaiterId>> KvStore::Get(const std::string& job,
                                                      const std::string& key,
                                                      ValueCallback on_value) {
  auto jit = values_.find(job);
  if (jit != values_.end()) {
    auto kit = jit->second.find(key);
    if (kit != jit->second.end()) {
      const std::string value = kit->second;  // the callback may change the store
      on_value(value);
      return std::optional<WaiterId>();
    }
  }
  EMBER_RETURN_IF_ERROR(CheckWaiter(job, "key", key));
  const WaiterId id = next_id_++;
  Waiter waiter;
  waiter.job = job;
  waiter.key = key;
  waiter.on_value = std::move(on_value);
  AddWaiter(id, std::move(waiter));
  return std::optional<WaiterId>(id);
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
  std::string value = std::to_string(sum);
  EMBER_RETURN_IF_ERROR(CheckStore(job, key, value.size()));
  Store(job, key, std::move(value));
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
  auto kit = jit->second.find(key);
  if (kit == jit->second.end()) return false;
  Usage& usage = usage_[job];
  usage.bytes -= std::min(usage.bytes, key.size() + kit->second.size());
  jit->second.erase(kit);
  if (jit->second.empty()) values_.erase(jit);
  if (usage.bytes == 0 && usage.waiters == 0) usage_.erase(job);
  return true;
}

Result<std::optional<KvStore::WaiterId>> KvStore::Arrive(const std::string& job,
                                                         const std::string& name,
                                                         uint32_t world_size, uint64_t round,
                                                         DoneCallback on_done,
                                                         uint64_t member) {
  if (world_size == 0) {
    return InvalidArgument(Where(job, "barrier", name) + ": world_size must be positive");
  }
  auto bit = barriers_.find({job, name});
  if (bit != barriers_.end() && bit->second.world_size != 0 &&
      bit->second.world_size != world_size) {
    return InvalidArgument(Where(job, "barrier", name) + " was opened with world_size " +
                           std::to_string(bit->second.world_size) + ", this arrival has " +
                           std::to_string(world_size));
  }
  if (bit == barriers_.end()) {
    EMBER_RETURN_IF_ERROR(CheckWaiter(job, "barrier", name));
    size_t names = 0;
    for (auto it = barriers_.lower_bound({job, std::string()});
         it != barriers_.end() && it->first.first == job; ++it)
      ++names;
    if (names >= limits_.max_job_barriers)
      return ResourceExhausted(Where(job, "barrier", name) + ": the job has " +
                               std::to_string(names) + " barriers, the limit");
    bit = barriers_.emplace(std::make_pair(job, name), Barrier{}).first;
  }
  Barrier& barrier = bit->second;
  if (round != 0 && round <= barrier.completed) {
    on_done(round);  // completed before; this caller did not hear it
    return std::optional<WaiterId>();
  }
  if (round > barrier.completed + 1) {
    barrier.completed = round - 1;  // this store lost them: the caller saw them complete
    ReleaseCompleted(barrier);
  }
  if (member != 0) {
    for (auto it = barrier.arrived.begin(); it != barrier.arrived.end(); ++it) {
      auto wit = waiters_.find(*it);
      if (wit->second.member != member) continue;
      EraseWaiter(wit);  // the same member again: its earlier arrival's caller is gone
      barrier.arrived.erase(it);
      break;
    }
  }
  if (barrier.arrived.size() + 1 < world_size) {
    EMBER_RETURN_IF_ERROR(CheckWaiter(job, "barrier", name));
    const WaiterId id = next_id_++;
    Waiter waiter;
    waiter.job = job;
    waiter.key = name;
    waiter.barrier = true;
    waiter.round = round;
    waiter.member = member;
    waiter.on_done = std::move(on_done);
    AddWaiter(id, std::move(waiter));
    barrier.world_size = world_size;
    barrier.arrived.push_back(id);
    return std::optional<WaiterId>(id);
  }

  // The last arrival: open the next round before running callbacks, which may arrive again.
  const uint64_t completed = ++barrier.completed;
  std::vector<DoneCallback> done;
  for (WaiterId id : barrier.arrived) {
    auto wit = waiters_.find(id);
    done.push_back(std::move(wit->second.on_done));
    EraseWaiter(wit);
  }
  barrier.arrived.clear();
  barrier.world_size = 0;
  done.push_back(std::move(on_done));
  for (DoneCallback& callback : done) callback(completed);
  return std::optional<WaiterId>();
}

void KvStore::ReleaseCompleted(Barrier& barrier) {
  std::vector<std::pair<DoneCallback, uint64_t>> done;
  for (auto it = barrier.arrived.begin(); it != barrier.arrived.end();) {
    auto wit = waiters_.find(*it);
    const uint64_t round = wit->second.round;
    if (round != 0 && round <= barrier.completed) {
      done.emplace_back(std::move(wit->second.on_done), round);
      EraseWaiter(wit);
      it = barrier.arrived.erase(it);
    } else {
      ++it;
    }
  }
  if (barrier.arrived.empty()) barrier.world_size = 0;
  for (auto& [callback, round] : done) callback(round);
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
      if (arrived.empty()) bit->second.world_size = 0;  // its rounds are remembered
    }
  }
  EraseWaiter(wit);
}

void KvStore::DropJob(const std::string& job) {
  values_.erase(job);
  usage_.erase(job);
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
      it = EraseWaiter(it);
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
