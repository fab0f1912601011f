#include "daemon/ring/ring_writer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/futex.h"
#include "ember/ring_sync.h"

namespace ember::daemon {
namespace {

constexpr uint64_t kPayloadOffset = ring::AlignUp(sizeof(ring::SlotHeader), ring::kCacheLine);

}  // namespace

Result<std::unique_ptr<RingWriter>> RingWriter::Create(Env& env, const std::string& name,
                                                       uint32_t slot_count, uint64_t payload_bytes,
                                                       uint64_t batches_per_epoch) {
  if (slot_count == 0) return InvalidArgument("ring '" + name + "': slot count must be > 0");
  const uint64_t slot_size = ring::SlotSizeFor(payload_bytes);
  const uint64_t total = ring::RingBytesFor(slot_count, slot_size);
  auto shm = env.CreateSharedMemory(name, total);
  if (!shm.ok()) return shm.status().WithContext("ring '" + name + "'");
  std::unique_ptr<SharedMemory> region = std::move(shm).value();
  auto* header = new (region->data()) ring::RingHeader();
  header->magic = ring::kMagic;
  header->version = ring::kVersion;
  header->slot_count = slot_count;
  header->slot_size = slot_size;
  header->order_offset = ring::OrderOffset();
  header->slots_offset = ring::SlotsOffsetFor(slot_count);
  header->payload_offset = kPayloadOffset;
  header->total_bytes = total;
  header->batches_per_epoch = batches_per_epoch;
  header->published.store(0);
  header->consumed.store(0);
  header->reader_wait_nanos.store(0);
  header->publications.store(0);
  header->reader_waiters.store(0);
  header->releases.store(0);
  header->writer_waiters.store(0);
  header->reader_stalls.store(0);
  // The memfd reads as zeros, which is kFree: the slots' pages stay untouched until the
  // writer first fills them.
  static_assert(ring::kFree == 0);
  return std::unique_ptr<RingWriter>(new RingWriter(std::move(region), slot_count, slot_size));
}

RingWriter::RingWriter(std::unique_ptr<SharedMemory> shm, uint32_t slot_count, uint64_t slot_size)
    : shm_(std::move(shm)),
      header_(static_cast<ring::RingHeader*>(shm_->data())),
      slot_count_(slot_count),
      slot_size_(slot_size),
      slots_offset_(ring::SlotsOffsetFor(slot_count)),
      payload_offset_(kPayloadOffset),
      order_(reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(shm_->data()) +
                                         ring::OrderOffset())),
      depth_(std::min(slot_count, kInitialDepth)),
      taken_(slot_count, false) {}

ring::SlotHeader* RingWriter::Slot(uint32_t i) const {
  auto* base = static_cast<uint8_t*>(shm_->data());
  return reinterpret_cast<ring::SlotHeader*>(base + slots_offset_ + uint64_t{i} * slot_size_);
}

void RingWriter::SetSharedRegions(const std::vector<ring::SharedRegion>& regions) {
  const size_t n = std::min<size_t>(regions.size(), ring::kMaxTensors);
  for (size_t i = 0; i < n; ++i) header_->shared[i] = regions[i];
  header_->shared_count = static_cast<uint32_t>(n);
}

uint32_t RingWriter::IndexOf(const ring::SlotHeader* slot) const {
  auto* base = static_cast<const uint8_t*>(shm_->data()) + slots_offset_;
  return static_cast<uint32_t>((reinterpret_cast<const uint8_t*>(slot) - base) / slot_size_);
}

std::pair<uint32_t, uint32_t> RingWriter::Scan() const {
  // Slots past the touched ones were never written, so they are free; reading their
  // headers would fault their pages in.
  const uint32_t touched = touched_.load(std::memory_order_relaxed);
  uint32_t lowest_free = touched < slot_count_ ? touched : slot_count_, busy = 0;
  for (uint32_t i = 0; i < touched; ++i) {
    if (taken_[i] || Slot(i)->state.load(std::memory_order_acquire) != ring::kFree)
      ++busy;
    else if (i < lowest_free)
      lowest_free = i;
  }
  return {lowest_free, busy};
}

ring::SlotHeader* RingWriter::Take(uint32_t index) {
  if (index + 1 > touched_.load(std::memory_order_relaxed))
    touched_.store(index + 1, std::memory_order_relaxed);
  taken_[index] = true;
  return Slot(index);
}

void RingWriter::Untake(ring::SlotHeader* slot) { taken_[IndexOf(slot)] = false; }

void RingWriter::Grow() {
  const uint32_t depth = depth_.load(std::memory_order_relaxed);
  if (depth < slot_count_) depth_.store(depth + 1, std::memory_order_relaxed);
}

ring::SlotHeader* RingWriter::Acquire(const std::atomic<bool>& stop) {
  const uint32_t stalls = header_->reader_stalls.load(std::memory_order_relaxed);
  if (stalls != stalls_seen_) {
    // The reader waited for a batch since the last Acquire: had the depth held this
    // writer back in between, a deeper ring would have had the batch ready. Once is not
    // yet a pattern (a reader starting late drains a full ring and then waits on a
    // producer that is simply slower): the second such wait grows the depth.
    if (held_back_ && ++starved_after_held_back_ % 2 == 0) Grow();
    stalls_seen_ = stalls;
    held_back_ = false;
  }
  while (!stop.load(std::memory_order_acquire)) {
    const uint32_t releases = header_->releases.load(std::memory_order_acquire);
    const auto [free_index, busy] = Scan();
    if (free_index < slot_count_ && busy < depth_.load(std::memory_order_relaxed))
      return Take(free_index);
    if (free_index < slot_count_) {
      held_back_ = true;
      // The reader sleeps with every published batch taken: the trainer holds all the
      // slots the depth allows and wants one more.
      if (header_->reader_waiters.load(std::memory_order_seq_cst) > 0 &&
          header_->consumed.load(std::memory_order_acquire) >= published()) {
        Grow();
        continue;
      }
    }
    ring::WaitForRelease(header_, releases, std::chrono::milliseconds(50));
  }
  return nullptr;
}

ring::SlotHeader* RingWriter::TryAcquireWithinDepth() {
  const auto [free_index, busy] = Scan();
  if (free_index < slot_count_ && busy < depth_.load(std::memory_order_relaxed))
    return Take(free_index);
  return nullptr;
}

ring::SlotHeader* RingWriter::TryAcquire() {
  const uint32_t free_index = Scan().first;
  return free_index < slot_count_ ? Take(free_index) : nullptr;
}

void RingWriter::Publish(ring::SlotHeader* slot) {
  Untake(slot);
  ring::PublishSlot(header_, order_, slot_count_, IndexOf(slot), slot, next_sequence_++,
                    ring::kReady);
}

void RingWriter::PublishEnd(ring::SlotHeader* slot, ring::EndStatus status,
                            const std::string& message) {
  Untake(slot);
  slot->num_tensors = 0;
  slot->num_samples = 0;
  slot->end_status = status;
  size_t n = std::min(message.size(), ring::kEndMessageBytes - 1);
  std::memcpy(slot->end_message, message.data(), n);
  slot->end_message[n] = '\0';
  ring::PublishSlot(header_, order_, slot_count_, IndexOf(slot), slot, next_sequence_++,
                    ring::kEnd);
}

bool RingWriter::SlotFree(uint32_t i) const {
  if (i >= touched_.load(std::memory_order_relaxed)) return true;
  return Slot(i)->state.load(std::memory_order_acquire) == ring::kFree;
}

void RingWriter::Wake() { FutexWakeAll(&header_->releases); }

}  // namespace ember::daemon
