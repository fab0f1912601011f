#include "daemon/stream/stream_manager.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "daemon/catalog/fingerprint.h"
#include "daemon/coordinator/job_name.h"

namespace ember::daemon {

namespace {

// How often the reaper looks for closed streams whose producers have stopped.
constexpr auto kReapInterval = std::chrono::milliseconds(20);
constexpr auto kGroupSweepInterval = std::chrono::milliseconds(200);

}  // namespace

StreamManager::StreamManager(Env* env, Catalog* catalog, JobCoordinator* local_coordinator,
                             DatasetCache* cache, DecodePool* decode_pool, StreamLimits limits)
    : StreamManager(env, catalog, local_coordinator,
                    [cache](const DatasetInfo& info) { return cache->Get(info); }, decode_pool,
                    limits) {}

StreamManager::StreamManager(Env* env, Catalog* catalog, JobCoordinator* local_coordinator,
                             SourceLoader load_source, DecodePool* decode_pool,
                             StreamLimits limits)
    : env_(env),
      catalog_(catalog),
      local_coordinator_(local_coordinator),
      load_source_(std::move(load_source)),
      decode_pool_(decode_pool),
      limits_(limits),
      shm_budget_bytes_(limits.shm_budget_bytes),
      default_slots_(limits.default_slots),
      reaper_([this] { Reap(); }) {}

StreamManager::~StreamManager() {
  std::map<uint64_t, std::shared_ptr<Stream>> streams;
  {
    MutexLock lock(&mu_);
    streams.swap(streams_);
  }
  // Stop them all first, so that their producers wind down side by side.
  for (auto& [id, stream] : streams) stream->Stop();
  {
    MutexLock lock(&mu_);
    for (auto& [id, stream] : streams) closing_.push_back(std::move(stream));
    shutting_down_ = true;
  }
  closing_cv_.SignalAll();
  reaper_.join();
}

void StreamManager::Reap() {
  MutexLock lock(&mu_);
  while (true) {
    while (closing_.empty() && !shutting_down_) {
      // A group goes with the last reference to it, which a caller of Open may hold:
      // look for gone ones now and then while any is open.
      SweepGroupsLocked();
      if (groups_.empty())
        closing_cv_.Wait(&mu_);
      else
        (void)closing_cv_.WaitFor(&mu_, kGroupSweepInterval);
    }
    if (closing_.empty()) return;
    std::vector<std::shared_ptr<Stream>> done;
    for (auto it = closing_.begin(); it != closing_.end();) {
      if ((*it)->producer_done()) {
        done.push_back(std::move(*it));
        it = closing_.erase(it);
      } else {
        ++it;
      }
    }
    for (std::shared_ptr<Stream>& stream : done) {
      const uint64_t id = stream->id(), bytes = stream->ring_bytes();
      const Principal owner = stream->params().owner;
      {
        MutexUnlock unlocked(&mu_);
        stream.reset();  // joins the finished producer and unmaps the ring
      }
      UnreserveLocked(owner, bytes);
      SweepGroupsLocked();
      spdlog::info("stream {} closed", id);
    }
    if (done.empty() && !closing_.empty()) (void)closing_cv_.WaitFor(&mu_, kReapInterval);
  }
}

Result<std::shared_ptr<Stream>> StreamManager::Open(StreamParams params) {
  EMBER_RETURN_IF_ERROR(CheckJobName(params.job, kMaxJobKeyBytes));
  if (params.batch_size == 0 || params.batch_size > limits_.max_batch_size)
    return InvalidArgument("batch_size: " + std::to_string(params.batch_size) +
                           " is out of range 1.." + std::to_string(limits_.max_batch_size));
  EMBER_RETURN_IF_ERROR(CheckWorldSize(params.world_size, limits_.max_world_size));
  if (params.rank >= params.world_size)
    return InvalidArgument("rank: " + std::to_string(params.rank) + " is not below world_size " +
                           std::to_string(params.world_size));
  if (params.epochs != 0 && params.start_epoch >= params.epochs)
    return InvalidArgument("start_epoch: " + std::to_string(params.start_epoch) +
                           " is not below epochs " + std::to_string(params.epochs));
  if (params.rejoin && (params.rejoin_epoch < params.start_epoch ||
                        (params.epochs != 0 && params.rejoin_epoch >= params.epochs)))
    return InvalidArgument("rejoin_epoch: " + std::to_string(params.rejoin_epoch) +
                           " is outside the stream's epochs " +
                           std::to_string(params.start_epoch) + ".." +
                           (params.epochs == 0 ? std::string("") : std::to_string(params.epochs - 1)));
  if (params.slots == 0) params.slots = default_slots_.load();
  if (params.slots < 2 || params.slots > limits_.max_slots)
    return InvalidArgument("slots: " + std::to_string(params.slots) + " is out of range 2.." +
                           std::to_string(limits_.max_slots));
  auto info = catalog_->Get(params.dataset);
  if (!info.ok()) return info.status();
  if (!MayRead(params.owner, *info)) return DatasetNotFound(params.dataset);
  if (params.expect_fingerprint != 0 && info->fingerprint != 0 &&
      params.expect_fingerprint != info->fingerprint)
    return FailedPrecondition("fingerprint: dataset '" + params.dataset + "' has " +
                              FingerprintHex(info->fingerprint) + ", the loader state is of " +
                              FingerprintHex(params.expect_fingerprint) +
                              " (the dataset changed since the state was saved)");
  if (params.rejoin) {  // before Stream::Start builds an entry per batch received
    const uint64_t per_step = uint64_t{params.batch_size} * params.world_size;
    const uint64_t most = (info->count + per_step - 1) / per_step;
    if (params.rejoin_received > most)
      return InvalidArgument("rejoin_received: " + std::to_string(params.rejoin_received) +
                             " is more than the " + std::to_string(most) +
                             " batches a rank of " + std::to_string(params.world_size) +
                             " gets of dataset '" + params.dataset + "' in an epoch");
  }
  if (params.start_position != 0 && params.start_position >= info->count)
    return InvalidArgument("start_position: " + std::to_string(params.start_position) +
                           " is not below the dataset's " + std::to_string(info->count) +
                           " samples");

  const uint64_t ring_bytes = ring::RingBytesFor(
      params.slots, ring::SlotSizeFor(BatchPayloadBytes(StreamTensors(*info, params.sample_ids), params.batch_size)));
  uint64_t id;
  {
    MutexLock lock(&mu_);
    if (draining_) return Unavailable("emberd is shutting down: no new streams");
    EMBER_RETURN_IF_ERROR(ReserveLocked(params.owner, ring_bytes,
                                        "a ring of " + std::to_string(ring_bytes) + " bytes (" +
                                            std::to_string(params.slots) + " slots of batch " +
                                            std::to_string(params.batch_size) + ")"));
    id = next_id_++;
  }
  std::shared_ptr<ShareGroup> group;
  if (!params.share.empty()) {
    auto joined = JoinGroup(params, *info);
    if (!joined.ok()) {
      MutexLock lock(&mu_);
      UnreserveLocked(params.owner, ring_bytes);
      return joined.status();
    }
    group = std::move(joined).value();
  }
  JobCoordinator* coordinator = local_coordinator_;
  if (!params.coordinator.empty()) {
    Result<JobCoordinator*> resolved =
        resolve_ ? resolve_(params.coordinator)
                 : Result<JobCoordinator*>(FailedPrecondition(
                       "coordinator: this daemon cannot reach other daemons"));
    if (!resolved.ok()) {
      MutexLock lock(&mu_);
      group.reset();
      SweepGroupsLocked();
      UnreserveLocked(params.owner, ring_bytes);
      return resolved.status().WithContext("coordinator '" + params.coordinator + "'");
    }
    coordinator = *resolved;
  }
  auto stream =
      Stream::Start(id, *env_, *coordinator, *info, load_source_(*info), decode_pool_, params,
                    std::move(group), remote_.load());
  MutexLock lock(&mu_);
  if (!stream.ok()) {
    SweepGroupsLocked();
    UnreserveLocked(params.owner, ring_bytes);
    if (stream.status().code() == StatusCode::kAlreadyExists)
      for (const auto& [open_id, open] : streams_)
        if (open->params().job == params.job && open->params().rank == params.rank)
          return AlreadyExists(stream.status().message() + ": stream " +
                               std::to_string(open_id) + " (dataset '" +
                               open->params().dataset + "') reads it; close that Loader "
                               "first, or open another rank");
    return stream.status();
  }
  std::shared_ptr<Stream> shared(std::move(stream).value());
  if (draining_) shared->Drain();  // opened while BeginDrain ran
  streams_[id] = shared;
  spdlog::info("stream {} opened: job '{}' rank {}/{} dataset '{}' batch {} slots {} ({} bytes)",
               id, params.job, params.rank, params.world_size, params.dataset, params.batch_size,
               params.slots, shared->ring_bytes());
  return shared;
}

Status StreamManager::ReserveLocked(const Principal& owner, uint64_t bytes,
                                    const std::string& ring) {
  const uint64_t budget = shm_budget_bytes_.load();
  if (reserved_bytes_ + bytes > budget)
    return ResourceExhausted(ring + " does not fit: " + std::to_string(reserved_bytes_) +
                             " of the shm_budget of " + std::to_string(budget) + " bytes in use");
  const uint64_t share = static_cast<uint64_t>(static_cast<double>(budget) * limits_.shm_user_share);
  if (!owner.privileged) {
    UserUse& use = users_[owner.uid];
    if (use.streams >= limits_.max_streams_per_user)
      return ResourceExhausted("uid " + std::to_string(owner.uid) + " has " +
                               std::to_string(use.streams) + " streams, the most one user may open");
    if (use.bytes + bytes > share)
      return ResourceExhausted(ring + " does not fit in the share of uid " +
                               std::to_string(owner.uid) + ": " + std::to_string(use.bytes) +
                               " of its " + std::to_string(share) +
                               " bytes (shm_user_share) in use");
    use.bytes += bytes;
    ++use.streams;
  }
  reserved_bytes_ += bytes;
  return Status::Ok();
}

void StreamManager::UnreserveLocked(const Principal& owner, uint64_t bytes) {
  reserved_bytes_ -= bytes;
  if (owner.privileged) return;
  auto it = users_.find(owner.uid);
  if (it == users_.end()) return;
  it->second.bytes -= bytes;
  if (--it->second.streams == 0) users_.erase(it);
}

Result<std::shared_ptr<ShareGroup>> StreamManager::JoinGroup(const StreamParams& params,
                                                              const DatasetInfo& info) {
  const std::string& name = params.share;
  if (name.size() > kMaxShareName ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string::npos)
    return InvalidArgument("share: '" + name + "' is not a group name (1.." +
                           std::to_string(kMaxShareName) + " of A-Z a-z 0-9 . _ -)");
  const std::string group = "share group '" + name + "'";
  if (info.spec.shuffle == "shards")
    return InvalidArgument("share: dataset '" + info.spec.name +
                           "' is shuffled by shards; a " + group +
                           " reads one order of samples (shuffle: full or none)");
  if (!params.coordinator.empty())
    return InvalidArgument("share: a " + group +
                           " decodes its order on one node; a job coordinated by another "
                           "daemon (coordinator '" + params.coordinator + "') cannot share");
  // A group is its users' own, unless the dataset is shared.
  const std::string key =
      (info.spec.shared ? std::string("*") : std::to_string(params.owner.uid)) + "/" + name;
  MutexLock lock(&mu_);
  SweepGroupsLocked();
  if (auto it = groups_.find(key); it != groups_.end()) {
    std::shared_ptr<ShareGroup> g = it->second.group.lock();
    if (g != nullptr) {
      if (g->dataset() != info.spec.name || g->fingerprint() != info.fingerprint)
        return InvalidArgument("share: " + group + " reads dataset '" + g->dataset() +
                               "'; this job reads '" + info.spec.name +
                               "' (name another group)");
      if (g->params().seed != params.seed || g->params().shuffle != params.shuffle)
        return InvalidArgument("share: " + group + " reads with seed " +
                               std::to_string(g->params().seed) + " and shuffle " +
                               (g->params().shuffle ? "on" : "off") + "; this job asks for seed " +
                               std::to_string(params.seed) + " and shuffle " +
                               (params.shuffle ? "on" : "off") +
                               " (a group has one order: use its seed, or another group)");
      return g;
    }
  }
  ShareGroup::Params gp;
  gp.name = name;
  gp.seed = params.seed;
  gp.shuffle = params.shuffle;
  gp.step_rows = uint64_t{params.batch_size} * params.world_size;
  gp.rows = (uint64_t{limits_.share_window} + 2) * gp.step_rows;
  EMBER_ASSIGN_OR_RETURN(std::shared_ptr<ShareGroup> g,
                         ShareGroup::Create(*env_, info, decode_pool_, std::move(gp)));
  EMBER_RETURN_IF_ERROR(ReserveLocked(
      params.owner, g->bytes(),
      group + "'s rows, " + std::to_string(g->bytes()) + " bytes (" +
          std::to_string(g->capacity()) + " rows)"));
  groups_[key] = GroupEntry{g, g->bytes(), params.owner};
  spdlog::info("{} started: dataset '{}' seed {} {} rows ({} bytes)", group, info.spec.name,
               params.seed, g->capacity(), g->bytes());
  return g;
}

void StreamManager::SweepGroupsLocked() {
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (it->second.group.expired()) {
      UnreserveLocked(it->second.owner, it->second.bytes);
      it = groups_.erase(it);
    } else {
      ++it;
    }
  }
}

void StreamManager::SetBudget(uint64_t shm_budget_bytes, uint32_t default_slots) {
  shm_budget_bytes_.store(shm_budget_bytes);
  default_slots_.store(default_slots);
}

void StreamManager::BeginDrain() {
  MutexLock lock(&mu_);
  draining_ = true;
  for (auto& [id, stream] : streams_) stream->Drain();
}

size_t StreamManager::BatchesInFlight() const {
  MutexLock lock(&mu_);
  size_t filling = 0;
  for (const auto& [id, stream] : streams_) filling += stream->filling() ? 1 : 0;
  return filling;
}

void StreamManager::Close(uint64_t id) {
  std::shared_ptr<Stream> stream;
  {
    MutexLock lock(&mu_);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    stream = std::move(it->second);
    streams_.erase(it);
  }
  stream->Stop();
  {
    MutexLock lock(&mu_);
    closing_.push_back(std::move(stream));
  }
  closing_cv_.SignalAll();
  spdlog::info("stream {} closing", id);
}

std::vector<StreamStats> StreamManager::Stats() const {
  std::vector<std::shared_ptr<Stream>> streams;
  {
    MutexLock lock(&mu_);
    for (const auto& [id, s] : streams_) streams.push_back(s);
  }
  std::vector<StreamStats> stats;
  for (const auto& s : streams) stats.push_back(s->Stats());
  return stats;
}

std::vector<DecodeWorkerStats> StreamManager::DecodeWorkers() const {
  const RemoteDecoders* remote = remote_.load();
  if (remote == nullptr) return {};
  return remote->Stats();
}

uint64_t StreamManager::shm_bytes_in_use() const {
  MutexLock lock(&mu_);
  return reserved_bytes_;
}

}  // namespace ember::daemon
