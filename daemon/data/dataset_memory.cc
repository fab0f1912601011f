#include "daemon/data/dataset_memory.h"

#include <algorithm>

namespace ember::daemon {

DatasetMemory::Charge::~Charge() { Remove(bytes_); }

Status DatasetMemory::Charge::Add(uint64_t bytes, const std::string& what) {
  MutexLock lock(&memory_.mu_);
  uint64_t& held = memory_.by_uid_[uid_];
  const uint64_t limit = memory_.per_uid_bytes_;
  if (bounded_ && (bytes > limit || held > limit - bytes)) {
    const uint64_t before = held;
    if (held == 0) memory_.by_uid_.erase(uid_);
    return ResourceExhausted(what + ": holding its " + std::to_string(bytes) +
                             " bytes in memory would take uid " + std::to_string(uid_) +
                             "'s datasets from " + std::to_string(before) + " to more than its " +
                             std::to_string(limit) + " bytes (user_limits.dataset_memory)");
  }
  held += bytes;
  bytes_ += bytes;
  return Status::Ok();
}

void DatasetMemory::Charge::Remove(uint64_t bytes) {
  bytes = std::min(bytes, bytes_);
  if (bytes == 0) return;
  bytes_ -= bytes;
  MutexLock lock(&memory_.mu_);
  auto it = memory_.by_uid_.find(uid_);
  if (it == memory_.by_uid_.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) memory_.by_uid_.erase(it);
}

std::unique_ptr<DatasetMemory::Charge> DatasetMemory::For(const Principal& owner) {
  return std::unique_ptr<Charge>(new Charge(*this, owner.uid, owner.known() && !owner.privileged));
}

uint64_t DatasetMemory::of(uid_t uid) const {
  MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? 0 : it->second;
}

}  // namespace ember::daemon
