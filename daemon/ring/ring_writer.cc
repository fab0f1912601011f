#include "daemon/ring/ring_writer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/futex.h"
#include "ember/ring_sync.h"

namespace ember::daemon {
namespace {

constexpr uint64_t kSlotsOffset = ring::AlignUp(sizeof(ring::RingHeader), ring::kCacheLine);
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
  header->slots_offset = kSlotsOffset;
  header->payload_offset = kPayloadOffset;
  header->total_bytes = total;
  header->batches_per_epoch = batches_per_epoch;
  header->published.store(0);
  header->consumed.store(0);
  header->reader_wait_nanos.store(0);
  auto* base = static_cast<uint8_t*>(region->data());
  for (uint32_t i = 0; i < slot_count; ++i) {
    auto* slot = new (base + kSlotsOffset + uint64_t{i} * slot_size) ring::SlotHeader();
    slot->state.store(ring::kFree);
    slot->waiters.store(0);
  }
  return std::unique_ptr<RingWriter>(new RingWriter(std::move(region), slot_count, slot_size));
}

RingWriter::RingWriter(std::unique_ptr<SharedMemory> shm, uint32_t slot_count, uint64_t slot_size)
    : shm_(std::move(shm)),
      header_(static_cast<ring::RingHeader*>(shm_->data())),
      slot_count_(slot_count),
      slot_size_(slot_size),
      slots_offset_(kSlotsOffset),
      payload_offset_(kPayloadOffset) {}

ring::SlotHeader* RingWriter::Slot(uint32_t i) const {
  auto* base = static_cast<uint8_t*>(shm_->data());
  return reinterpret_cast<ring::SlotHeader*>(base + slots_offset_ + uint64_t{i} * slot_size_);
}

uint32_t RingWriter::IndexOf(const ring::SlotHeader* slot) const {
  auto* base = static_cast<const uint8_t*>(shm_->data()) + slots_offset_;
  return static_cast<uint32_t>((reinterpret_cast<const uint8_t*>(slot) - base) / slot_size_);
}

ring::SlotHeader* RingWriter::Acquire(const std::atomic<bool>& stop) {
  ring::SlotHeader* slot = Slot(static_cast<uint32_t>(next_sequence_ % slot_count_));
  while (!stop.load(std::memory_order_acquire)) {
    uint32_t state = slot->state.load(std::memory_order_acquire);
    if (state == ring::kFree) return slot;
    ring::WaitWhileState(slot, state, std::chrono::milliseconds(50));
  }
  return nullptr;
}

ring::SlotHeader* RingWriter::TryAcquire() {
  ring::SlotHeader* slot = Slot(static_cast<uint32_t>(next_sequence_ % slot_count_));
  return slot->state.load(std::memory_order_acquire) == ring::kFree ? slot : nullptr;
}

void RingWriter::Publish(ring::SlotHeader* slot) {
  slot->sequence = next_sequence_++;
  header_->published.fetch_add(1, std::memory_order_relaxed);
  ring::SetSlotState(slot, ring::kReady);
}

void RingWriter::PublishEnd(ring::SlotHeader* slot, ring::EndStatus status,
                            const std::string& message) {
  slot->num_tensors = 0;
  slot->num_samples = 0;
  slot->end_status = status;
  size_t n = std::min(message.size(), ring::kEndMessageBytes - 1);
  std::memcpy(slot->end_message, message.data(), n);
  slot->end_message[n] = '\0';
  slot->sequence = next_sequence_++;
  ring::SetSlotState(slot, ring::kEnd);
}

bool RingWriter::SlotFree(uint32_t i) const {
  return Slot(i)->state.load(std::memory_order_acquire) == ring::kFree;
}

void RingWriter::Wake() {
  for (uint32_t i = 0; i < slot_count_; ++i) FutexWakeAll(&Slot(i)->state);
}

}  // namespace ember::daemon
