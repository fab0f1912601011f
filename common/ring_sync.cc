#include "ember/ring_sync.h"

#include "common/futex.h"

namespace ember::ring {

namespace {

void WakeSleepers(std::atomic<uint32_t>* word, const std::atomic<uint32_t>* waiters) {
  if (waiters->load(std::memory_order_seq_cst) > 0) FutexWakeAll(word);
}

// Sleeps while *word == from, counted in *waiters, at most `timeout`; calls `before_sleep`
// once counted. Returns the value seen.
template <typename BeforeSleep>
uint32_t WaitWhileEqual(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiters,
                        uint32_t from, std::chrono::milliseconds timeout,
                        BeforeSleep before_sleep) {
  uint32_t value = word->load(std::memory_order_acquire);
  for (int i = 0; i < 64 && value == from; ++i) value = word->load(std::memory_order_acquire);
  if (value != from) return value;
  waiters->fetch_add(1, std::memory_order_seq_cst);
  before_sleep();
  value = word->load(std::memory_order_seq_cst);
  if (value == from) {
    FutexWait(word, from, timeout);
    value = word->load(std::memory_order_acquire);
  }
  waiters->fetch_sub(1, std::memory_order_seq_cst);
  return value;
}

}  // namespace

void PublishSlot(RingHeader* header, uint32_t* order, uint32_t slot_count, uint32_t index,
                 SlotHeader* slot, uint64_t sequence, SlotState state) {
  slot->sequence = sequence;
  order[sequence % slot_count] = index;
  if (state == kReady) header->published.fetch_add(1, std::memory_order_relaxed);
  slot->state.store(state, std::memory_order_release);
  header->publications.fetch_add(1, std::memory_order_seq_cst);
  WakeSleepers(&header->publications, &header->reader_waiters);
}

void ReleaseSlot(RingHeader* header, SlotHeader* slot) {
  slot->state.store(kFree, std::memory_order_release);
  header->releases.fetch_add(1, std::memory_order_seq_cst);
  WakeSleepers(&header->releases, &header->writer_waiters);
}

uint32_t WaitForPublication(RingHeader* header, uint32_t from, std::chrono::milliseconds timeout) {
  return WaitWhileEqual(&header->publications, &header->reader_waiters, from, timeout,
                        [header] { WakeWriter(header); });
}

uint32_t WaitForRelease(RingHeader* header, uint32_t from, std::chrono::milliseconds timeout) {
  return WaitWhileEqual(&header->releases, &header->writer_waiters, from, timeout, [] {});
}

void WakeWriter(RingHeader* header) { WakeSleepers(&header->releases, &header->writer_waiters); }

}  // namespace ember::ring
