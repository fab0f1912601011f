// RingWriter: the daemon's (producer's) end of one stream's ring. See
// ember/ring_layout.h for the layout and protocol.
//
// Owns the sealed memfd and its mapping; the fd is what the RPC layer hands to the
// trainer. The trainer maps the ring writable, so the writer keeps its own copy of the
// geometry and never reads it back from the shared header.
//
// Prefetch depth: the writer keeps at most depth() slots out of kFree (being filled,
// ready, or held by the trainer) and always fills the lowest-numbered free slot, so a
// ring touches only depth() slots' pages, not slot_count's. The depth starts at
// kInitialDepth (one batch held by the trainer, one ready, one being filled: enough when
// production keeps up) and grows by one, up to slot_count, each second time the reader
// had to wait for a batch although the depth had held the writer back since its
// previous wait (bursty production), and whenever the reader waits while the trainer
// holds every slot the depth allows.
//
// The producer may hold several acquired slots at once (filling one batch while the
// next one starts); they count against the depth until published or Abandon()ed.
//
// Thread-safety: one producer thread calls Acquire/TryAcquire*/Publish*/Abandon; stats
// accessors and Wake() may be called from any thread.
#ifndef EMBER_DAEMON_RING_RING_WRITER_H_
#define EMBER_DAEMON_RING_RING_WRITER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "ember/ring_layout.h"
#include "ember/status.h"

namespace ember::daemon {

class RingWriter {
 public:
  // A ring of `slot_count` slots, each able to hold `payload_bytes` of tensors.
  // kResourceExhausted if the memfd cannot be created; kInvalidArgument for 0 slots.
  static Result<std::unique_ptr<RingWriter>> Create(Env& env, const std::string& name,
                                                    uint32_t slot_count, uint64_t payload_bytes,
                                                    uint64_t batches_per_epoch);

  int fd() const { return shm_->fd(); }
  size_t size() const { return shm_->size(); }
  uint32_t slot_count() const { return slot_count_; }
  uint64_t slot_size() const { return slot_size_; }

  static constexpr uint32_t kInitialDepth = 3;

  // A free slot for the next batch within the prefetch depth (see above), once there is
  // one. Blocks; returns nullptr if `stop` becomes true first (checked at least every
  // 50 ms and after Wake()).
  ring::SlotHeader* Acquire(const std::atomic<bool>& stop);

  // A free slot within the prefetch depth if there is one now, else nullptr (and the
  // depth does not count as having held the writer back). Never blocks.
  ring::SlotHeader* TryAcquireWithinDepth();

  // The lowest free slot, whatever the depth (for the end marker), else nullptr. Never
  // blocks.
  ring::SlotHeader* TryAcquire();

  // Gives back an acquired slot without publishing it.
  void Abandon(ring::SlotHeader* slot) { Untake(slot); }

  // Records the share group's regions in the header (before the reader attaches).
  void SetSharedRegions(const std::vector<ring::SharedRegion>& regions);

  // Index (0..slot_count-1) of a slot returned by Acquire.
  uint32_t IndexOf(const ring::SlotHeader* slot) const;

  // Start of the slot's bytes (tensor offsets are relative to it) and its payload area.
  uint8_t* SlotBase(ring::SlotHeader* slot) const { return reinterpret_cast<uint8_t*>(slot); }
  uint64_t payload_offset() const { return payload_offset_; }
  uint64_t payload_capacity() const { return slot_size_ - payload_offset_; }

  // Publishes the acquired slot (its header fields and payload filled by the caller).
  void Publish(ring::SlotHeader* slot);

  // Publishes the acquired slot as the end of the stream.
  void PublishEnd(ring::SlotHeader* slot, ring::EndStatus status, const std::string& message);

  // True if the slot with index `i` has been freed by the reader (or never used).
  bool SlotFree(uint32_t i) const;

  // Wakes a producer sleeping in Acquire (after setting its stop flag).
  void Wake();

  // The prefetch depth now, and how many slots have ever been written (the highest index
  // taken + 1): the slots whose pages the ring has touched.
  uint32_t depth() const { return depth_.load(std::memory_order_relaxed); }
  uint32_t slots_touched() const { return touched_.load(std::memory_order_relaxed); }

  uint64_t published() const { return header_->published.load(std::memory_order_relaxed); }
  uint64_t consumed() const { return header_->consumed.load(std::memory_order_relaxed); }
  // The reader's own total of nanoseconds it waited for batches (any value it wrote).
  uint64_t reader_wait_nanos() const {
    return header_->reader_wait_nanos.load(std::memory_order_relaxed);
  }

 private:
  RingWriter(std::unique_ptr<SharedMemory> shm, uint32_t slot_count, uint64_t slot_size);
  ring::SlotHeader* Slot(uint32_t i) const;
  // The lowest free slot's index (slot_count_ if none) and how many are not free.
  std::pair<uint32_t, uint32_t> Scan() const;
  ring::SlotHeader* Take(uint32_t index);
  void Untake(ring::SlotHeader* slot);
  void Grow();

  std::unique_ptr<SharedMemory> shm_;
  ring::RingHeader* header_;
  const uint32_t slot_count_;
  const uint64_t slot_size_;
  const uint64_t slots_offset_;
  const uint64_t payload_offset_;
  uint32_t* const order_;  // the order table, in the mapping
  uint64_t next_sequence_ = 0;  // producer thread only
  std::atomic<uint32_t> depth_;
  std::atomic<uint32_t> touched_{0};
  uint32_t stalls_seen_ = 0;  // producer thread only: reader_stalls at the last Acquire
  bool held_back_ = false;    // producer thread only: the depth held it back since then
  uint32_t starved_after_held_back_ = 0;  // producer thread only: such waits so far
  std::vector<bool> taken_;  // producer thread only: acquired, not yet published
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RING_RING_WRITER_H_
