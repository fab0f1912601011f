#include "ember/ring_sync.h"

#include "common/futex.h"

namespace ember::ring {

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
