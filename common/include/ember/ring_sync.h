// The ring protocol's steps that touch shared words (see ring_layout.h): publishing and
// releasing a slot, and sleeping on the other side's counter (Linux futexes on the
// shared mapping, so not FUTEX_PRIVATE). Used by the daemon's writer and the SDK's
// reader, so both speak the protocol through the same code.
#ifndef EMBER_RING_SYNC_H_
#define EMBER_RING_SYNC_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "ember/ring_layout.h"

namespace ember::ring {

// Writer: publishes `slot` (index `index` of `slot_count`, its header and payload
// filled) as batch `sequence`: records it in `order`, the ring's order table, stores
// `state` (kReady or kEnd) with release, then counts the publication and wakes a
// sleeping reader. The geometry comes from the writer, never from the shared header.
void PublishSlot(RingHeader* header, uint32_t* order, uint32_t slot_count, uint32_t index,
                 SlotHeader* slot, uint64_t sequence, SlotState state);

// Reader: hands `slot` back to the writer (kFree, release), counts the release and wakes
// a sleeping writer.
void ReleaseSlot(RingHeader* header, SlotHeader* slot);

// Reader: sleeps while header->publications == `from`, at most `timeout`, and returns
// the count seen (which may still be `from`). Spins briefly first; before sleeping it
// wakes the writer, which may be held back by its depth with the reader now starved.
uint32_t WaitForPublication(RingHeader* header, uint32_t from, std::chrono::milliseconds timeout);

// Writer: sleeps while header->releases == `from`, at most `timeout`; returns the count
// seen.
uint32_t WaitForRelease(RingHeader* header, uint32_t from, std::chrono::milliseconds timeout);

// Wakes a writer sleeping in WaitForRelease (it re-checks; nothing changes).
void WakeWriter(RingHeader* header);

}  // namespace ember::ring

#endif  // EMBER_RING_SYNC_H_
