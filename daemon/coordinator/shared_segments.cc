#include "daemon/coordinator/shared_segments.h"

#include <algorithm>
#include <utility>

namespace ember::daemon {
namespace {

// memfd_create takes names of up to 249 bytes (NAME_MAX less "memfd:").
constexpr size_t kMaxMemfdName = 249;

std::string Where(const std::string& job, const std::string& name) {
  return "job '" + job + "': shared memory '" + name + "'";
}

}  // namespace

SharedSegments::SharedSegments(Env* env, SharedSegmentLimits limits)
    : env_(env), limits_(limits) {}

Result<std::shared_ptr<SharedMemory>> SharedSegments::Open(const std::string& job,
                                                           const std::string& name,
                                                           uint32_t rank, uint32_t world_size,
                                                           uint64_t bytes, const Principal& owner) {
  if (job.empty()) return InvalidArgument("shared memory '" + name + "': job must not be empty");
  if (name.empty()) {
    return InvalidArgument("job '" + job + "': shared memory name must not be empty");
  }
  const std::string where = Where(job, name);
  EMBER_RETURN_IF_ERROR(CheckWorldSize(world_size, limits_.max_world_size).WithContext(where));
  if (rank >= world_size) {
    return InvalidArgument(where + ": rank " + std::to_string(rank) + " is not below world_size " +
                           std::to_string(world_size));
  }
  if (bytes == 0) return InvalidArgument(where + ": bytes must be positive");
  if (bytes > limits_.max_bytes) {
    constexpr uint64_t kGiB = uint64_t{1} << 30;
    const std::string in_gib = limits_.max_bytes % kGiB == 0
                                   ? " (" + std::to_string(limits_.max_bytes / kGiB) + " GiB)"
                                   : "";
    return InvalidArgument(where + ": " + std::to_string(bytes) + " bytes is more than the " +
                           std::to_string(limits_.max_bytes) + " bytes" + in_gib +
                           " a segment may have");
  }

  MutexLock lock(&mu_);
  const uint64_t now = env_->NowMicros();
  DropExpired(now);
  const auto key = std::make_pair(job, name);
  auto it = pending_.find(key);
  if (it != pending_.end()) {
    const Entry& p = it->second;
    if (p.world_size != world_size || p.bytes != bytes) {
      return InvalidArgument(where + " was opened with world_size " +
                             std::to_string(p.world_size) + " and " + std::to_string(p.bytes) +
                             " bytes, this call has world_size " + std::to_string(world_size) +
                             " and " + std::to_string(bytes) + " bytes");
    }
  } else {
    if (world_size > 1 && pending_.size() >= limits_.max_pending) {
      return ResourceExhausted(where + ": " + std::to_string(pending_.size()) +
                               " segments are already waiting for their ranks (the most allowed)");
    }
    if (world_size > 1 && !owner.privileged) {
      size_t owned = 0;
      for (const auto& [k, entry] : pending_) owned += entry.owner.uid == owner.uid;
      if (owned >= limits_.max_pending_per_owner)
        return ResourceExhausted(where + ": " + std::to_string(owned) + " segments of " +
                                 Describe(owner) +
                                 "'s jobs are already waiting for their ranks (user_limits.pending_segments)");
    }
    std::string memfd_name = "ember-shm-" + job + "-" + name;
    if (memfd_name.size() > kMaxMemfdName) memfd_name.resize(kMaxMemfdName);
    auto created = env_->CreateSharedMemory(memfd_name, static_cast<size_t>(bytes));
    if (!created.ok()) return created.status().WithContext(where);
    Entry p;
    p.memory = std::shared_ptr<SharedMemory>(std::move(created).value());
    p.world_size = world_size;
    p.has.assign(world_size, false);
    p.bytes = bytes;
    p.created_micros = now;
    p.owner = owner;
    it = pending_.emplace(key, std::move(p)).first;
  }
  Entry& p = it->second;
  std::shared_ptr<SharedMemory> memory = p.memory;
  p.has[rank] = true;
  if (std::find(p.has.begin(), p.has.end(), false) == p.has.end()) pending_.erase(it);
  return memory;
}

size_t SharedSegments::NumPending() const {
  MutexLock lock(&mu_);
  return pending_.size();
}

std::vector<PendingSegment> SharedSegments::Pending(
    const std::function<bool(const std::string& job)>& include) const {
  MutexLock lock(&mu_);
  const uint64_t now = env_->NowMicros();
  std::vector<PendingSegment> out;
  for (const auto& [key, p] : pending_) {
    if (Expired(p, now) || (include && !include(key.first))) continue;
    PendingSegment segment;
    segment.job = key.first;
    segment.name = key.second;
    segment.world_size = p.world_size;
    segment.bytes = p.bytes;
    segment.age_micros = now >= p.created_micros ? now - p.created_micros : 0;
    for (uint32_t rank = 0; rank < p.world_size; ++rank) {
      if (p.has[rank]) continue;
      if (segment.missing_ranks.size() < kMaxRanksListed) {
        segment.missing_ranks.push_back(rank);
      } else {
        ++segment.missing_unlisted;
      }
    }
    out.push_back(std::move(segment));
  }
  return out;
}

bool SharedSegments::Expired(const Entry& entry, uint64_t now_micros) const {
  return now_micros >= entry.created_micros &&
         now_micros - entry.created_micros >= limits_.ttl_micros;
}

void SharedSegments::DropExpired(uint64_t now_micros) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = Expired(it->second, now_micros) ? pending_.erase(it) : std::next(it);
  }
}

}  // namespace ember::daemon
