#include "daemon/stream/stream_manager.h"

#include <spdlog/spdlog.h>

namespace ember::daemon {

StreamManager::StreamManager(Env* env, Catalog* catalog, JobLedger* ledger, DatasetCache* cache,
                             DecodePool* decode_pool, StreamLimits limits)
    : env_(env),
      catalog_(catalog),
      ledger_(ledger),
      cache_(cache),
      decode_pool_(decode_pool),
      limits_(limits) {}

StreamManager::~StreamManager() {
  std::map<uint64_t, std::shared_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.swap(streams_);
  }
  streams.clear();
}

Result<std::shared_ptr<Stream>> StreamManager::Open(StreamParams params) {
  if (params.job.empty()) return InvalidArgument("job: must not be empty");
  if (params.batch_size == 0 || params.batch_size > limits_.max_batch_size)
    return InvalidArgument("batch_size: " + std::to_string(params.batch_size) +
                           " is out of range 1.." + std::to_string(limits_.max_batch_size));
  if (params.world_size == 0) return InvalidArgument("world_size: must be at least 1");
  if (params.rank >= params.world_size)
    return InvalidArgument("rank: " + std::to_string(params.rank) + " is not below world_size " +
                           std::to_string(params.world_size));
  if (params.epochs != 0 && params.start_epoch >= params.epochs)
    return InvalidArgument("start_epoch: " + std::to_string(params.start_epoch) +
                           " is not below epochs " + std::to_string(params.epochs));
  if (params.slots == 0) params.slots = limits_.default_slots;
  if (params.slots < 2 || params.slots > limits_.max_slots)
    return InvalidArgument("slots: " + std::to_string(params.slots) + " is out of range 2.." +
                           std::to_string(limits_.max_slots));
  auto info = catalog_->Get(params.dataset);
  if (!info.ok()) return info.status();

  const uint64_t ring_bytes = ring::RingBytesFor(
      params.slots, ring::SlotSizeFor(BatchPayloadBytes(*info, params.batch_size)));
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reserved_bytes_ + ring_bytes > limits_.shm_budget_bytes)
      return ResourceExhausted("a ring of " + std::to_string(ring_bytes) + " bytes (" +
                               std::to_string(params.slots) + " slots of batch " +
                               std::to_string(params.batch_size) + ") does not fit: " +
                               std::to_string(reserved_bytes_) + " of the shm_budget of " +
                               std::to_string(limits_.shm_budget_bytes) + " bytes in use");
    reserved_bytes_ += ring_bytes;
    id = next_id_++;
  }
  auto stream = Stream::Start(id, *env_, *ledger_, *info, cache_->Get(*info), decode_pool_, params);
  std::lock_guard<std::mutex> lock(mu_);
  if (!stream.ok()) {
    reserved_bytes_ -= ring_bytes;
    return stream.status();
  }
  std::shared_ptr<Stream> shared(std::move(stream).value());
  streams_[id] = shared;
  spdlog::info("stream {} opened: job '{}' rank {}/{} dataset '{}' batch {} slots {} ({} bytes)",
               id, params.job, params.rank, params.world_size, params.dataset, params.batch_size,
               params.slots, shared->ring_bytes());
  return shared;
}

void StreamManager::Close(uint64_t id) {
  std::shared_ptr<Stream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    stream = std::move(it->second);
    streams_.erase(it);
  }
  const uint64_t bytes = stream->ring_bytes();
  stream.reset();  // joins the producer, outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  reserved_bytes_ -= bytes;
  spdlog::info("stream {} closed", id);
}

std::vector<StreamStats> StreamManager::Stats() const {
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, s] : streams_) streams.push_back(s);
  }
  std::vector<StreamStats> stats;
  for (const auto& s : streams) stats.push_back(s->Stats());
  return stats;
}

uint64_t StreamManager::shm_bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_bytes_;
}

}  // namespace ember::daemon
