// Sleeping and waking on ring words shared between processes (Linux futexes on the
// shared mapping, so not FUTEX_PRIVATE). Used by both the daemon's writer and the SDK's
// reader; see ring_layout.h for the protocol.
#ifndef EMBER_RING_SYNC_H_
#define EMBER_RING_SYNC_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "ember/ring_layout.h"

namespace ember::ring {

// Stores `state` into the slot (release) and wakes the other side if it sleeps.
void SetSlotState(SlotHeader* slot, SlotState state);

// Waits until the slot's state is not `from`, sleeping at most `timeout` per sleep and
// returning the state seen (which may still be `from` after `timeout`).
uint32_t WaitWhileState(SlotHeader* slot, uint32_t from, std::chrono::milliseconds timeout);

}  // namespace ember::ring

#endif  // EMBER_RING_SYNC_H_
