#include "ember/ring_sync.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace ember::ring {

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::milliseconds timeout) {
  struct timespec ts;
  ts.tv_sec = timeout.count() / 1000;
  ts.tv_nsec = (timeout.count() % 1000) * 1000000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void SetSlotState(SlotHeader* slot, SlotState state) {
  slot->state.store(state, std::memory_order_seq_cst);
  if (slot->waiters.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&slot->state);
}

uint32_t WaitWhileState(SlotHeader* slot, uint32_t from, std::chrono::milliseconds timeout) {
  uint32_t state = slot->state.load(std::memory_order_acquire);
  if (state != from) return state;
  // Spin briefly: the other side is usually just about to publish.
  for (int i = 0; i < 64; ++i) {
    state = slot->state.load(std::memory_order_acquire);
    if (state != from) return state;
  }
  slot->waiters.fetch_add(1, std::memory_order_seq_cst);
  state = slot->state.load(std::memory_order_seq_cst);
  if (state == from) {
    FutexWait(&slot->state, from, timeout);
    state = slot->state.load(std::memory_order_acquire);
  }
  slot->waiters.fetch_sub(1, std::memory_order_seq_cst);
  return state;
}

}  // namespace ember::ring
