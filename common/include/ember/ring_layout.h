// The ring: the binary contract between emberd (the only writer) and one trainer
// process (the only reader) of a stream. Both sides include this header; nothing else
// crosses the shared memory.
//
// Glossary
//   ring    one shared-memory region (a sealed memfd): a RingHeader, the order table
//           (slot_count uint32 slot indexes), then slot_count slots.
//   slot    slot_size bytes: a SlotHeader, then the batch payload at payload_offset.
//   batch   up to kMaxTensors tensors laid out in the slot's payload (descriptors in the
//           SlotHeader, offsets relative to the start of the slot, 64-byte aligned), or
//           in a shared region (below).
//   shared region  (streams of a share group, version 6) decoded rows of one tensor that
//           several jobs' streams read: a second, sealed memfd the reader maps read-only
//           (RingHeader::shared lists where each region lies in it). A region is a ring
//           of rows; the reader maps it twice back to back, so that any run of rows that
//           wraps past its end is still one contiguous tensor. A tensor whose desc has
//           region k >= 1 lies in shared[k-1] at `offset` from that region's start
//           (offset < bytes, offset + nbytes <= 2 * bytes). The writer never writes rows
//           a published slot points to until the reader hands the slot back.
//
// Protocol (single producer, single consumer, batches in sequence order):
//   The writer fills any slot whose state is kFree (the lowest-numbered one, so that a
//   ring whose reader keeps up touches only the first few slots' pages), records the
//   slot's index in order[seq % slot_count], publishes the slot by storing kReady
//   (release) and then counts it in `publications` (release), waking a sleeping reader.
//   The reader takes batch seq from slot order[seq % slot_count] once `publications`
//   is past seq, marks it kReading, and stores kFree (release) when the last tensor
//   viewing it is released (slots may be released out of order), then counts it in
//   `releases`, waking a sleeping writer. The final slot of a stream is published with
//   state kEnd (no payload; end_status says why).
//   The writer keeps at most its prefetch depth of slots out of kFree (filling, ready
//   or held); the depth starts small and grows only when the reader had to wait while
//   the depth held the writer back. So the ring's pages stay untouched beyond what
//   hides production latency.
//   A side that finds nothing to do sleeps on the other side's counter with a shared
//   futex after incrementing its own `*_waiters`; the other side calls FUTEX_WAKE only
//   when it sees waiters > 0. So the fast path has no syscall.
//   Both sides treat the ring as hostile input: indexes, offsets and sizes are checked
//   against the geometry in RingHeader before use.
#ifndef EMBER_RING_LAYOUT_H_
#define EMBER_RING_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ember::ring {

inline constexpr uint64_t kMagic = 0x31474e4952424d45ull;  // "EMBRING1", little-endian
inline constexpr uint32_t kVersion = 6;
inline constexpr size_t kCacheLine = 64;
inline constexpr uint32_t kMaxTensors = 8;
inline constexpr uint32_t kMaxDims = 6;
inline constexpr size_t kNameBytes = 16;
inline constexpr size_t kEndMessageBytes = 256;

enum class DType : uint32_t {
  kUInt8 = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kFloat32 = 5,
  kFloat64 = 6,
  kUInt16 = 7,
};

// Bytes per element of `dtype`, or 0 if it is not a known value.
constexpr size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kInt8: return 1;
    case DType::kInt16:
    case DType::kUInt16: return 2;
    case DType::kInt32:
    case DType::kFloat32: return 4;
    case DType::kInt64:
    case DType::kFloat64: return 8;
  }
  return 0;
}

enum SlotState : uint32_t {
  kFree = 0,     // owned by the writer
  kReady = 1,    // a batch is published; owned by the reader
  kReading = 2,  // the reader holds tensors viewing it
  kEnd = 3,      // the stream is over; see SlotHeader::end_status
};

enum EndStatus : uint32_t {
  kEndComplete = 0,   // all requested epochs were delivered
  kEndCancelled = 1,  // the daemon closed the stream (shutdown, stream closed)
  kEndError = 2,      // a data error stopped the stream; end_message says which
};

struct TensorDesc {
  char name[kNameBytes];  // NUL-terminated, e.g. "image", "label"
  uint32_t dtype;         // a DType
  uint32_t ndim;          // <= kMaxDims; shape[0] is the batch dimension
  int64_t shape[kMaxDims];
  uint64_t offset;        // from the start of the slot (region 0, a multiple of
                          // kCacheLine) or of shared region `region` - 1
  uint64_t nbytes;        // product(shape) * DTypeSize(dtype)
  uint32_t region;        // 0: in the slot; k >= 1: in RingHeader::shared[k - 1]
  uint32_t reserved;
};

struct alignas(kCacheLine) SlotHeader {
  std::atomic<uint32_t> state;    // a SlotState; futex word
  uint32_t reserved;
  uint32_t num_tensors;
  uint32_t num_samples;           // rows in this batch (the last batches may be smaller)
  uint64_t sequence;              // 0, 1, 2, ... over the life of the stream
  uint64_t epoch;
  uint64_t index_in_epoch;        // 0 .. batches_per_epoch-1 for this rank
  uint32_t last_in_epoch;         // 1 on this rank's final batch of `epoch`
  uint32_t end_status;            // an EndStatus, valid when state == kEnd
  uint64_t position;              // the epoch's order is consumed up to this position once
                                  // every rank consumed this batch's global step
  char end_message[kEndMessageBytes];
  TensorDesc tensors[kMaxTensors];
};

struct SharedRegion {
  uint64_t offset;  // in the shared memfd, a multiple of the page size
  uint64_t bytes;   // a multiple of the page size
};

struct alignas(kCacheLine) RingHeader {
  uint64_t magic;           // kMagic
  uint32_t version;         // kVersion
  uint32_t slot_count;
  uint64_t slot_size;       // bytes per slot, multiple of kCacheLine
  uint64_t slots_offset;    // from the start of the ring to slot 0
  uint64_t payload_offset;  // from the start of a slot to its payload
  uint64_t total_bytes;     // size of the whole mapping
  uint64_t batches_per_epoch;  // per rank
  uint64_t order_offset;    // from the start of the ring to order[0] (uint32 each)
  // Written by the writer (the reader only adds to reader_waiters).
  alignas(kCacheLine) std::atomic<uint64_t> published;  // batches published so far
  std::atomic<uint32_t> publications;    // futex word: slots published (batches and the
                                         // end marker), modulo 2^32
  std::atomic<uint32_t> reader_waiters;  // readers asleep on `publications`
  // Written by the reader (the writer only adds to writer_waiters).
  alignas(kCacheLine) std::atomic<uint64_t> consumed;   // batches taken so far
  // Nanoseconds the reader waited for a batch that was not ready yet (the trainer's data
  // stall), in total; the daemon reports it as it is (the reader's own account).
  std::atomic<uint64_t> reader_wait_nanos;
  std::atomic<uint32_t> releases;        // futex word: slots handed back, modulo 2^32
  std::atomic<uint32_t> writer_waiters;  // writers asleep on `releases`
  std::atomic<uint32_t> reader_stalls;   // times the reader found its batch not ready
  // Written once by the writer before the reader attaches: the shared regions (0 when
  // the stream reads no share group's rows) and where each lies in the shared memfd.
  alignas(kCacheLine) uint32_t shared_count;  // <= kMaxTensors
  uint32_t shared_reserved;
  SharedRegion shared[kMaxTensors];
};

static_assert(std::is_standard_layout_v<SlotHeader>);
static_assert(std::is_standard_layout_v<RingHeader>);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4 && sizeof(std::atomic<uint64_t>) == 8);
static_assert(sizeof(TensorDesc) == 96);
static_assert(sizeof(SlotHeader) % kCacheLine == 0);
static_assert(sizeof(RingHeader) == 6 * kCacheLine);
static_assert(offsetof(RingHeader, shared_count) == 3 * kCacheLine);
static_assert(offsetof(RingHeader, published) == kCacheLine);
static_assert(offsetof(RingHeader, consumed) == 2 * kCacheLine);
static_assert(offsetof(RingHeader, reader_wait_nanos) == 2 * kCacheLine + 8);
static_assert(offsetof(RingHeader, order_offset) == 56);

constexpr uint64_t AlignUp(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

// Bytes needed for a slot whose payload is `payload_bytes` laid out as tensors each
// padded to kCacheLine.
constexpr uint64_t SlotSizeFor(uint64_t payload_bytes) {
  return AlignUp(sizeof(SlotHeader), kCacheLine) + AlignUp(payload_bytes, kCacheLine);
}

// Where the order table starts and where slot 0 starts, for `slot_count` slots.
constexpr uint64_t OrderOffset() { return AlignUp(sizeof(RingHeader), kCacheLine); }
constexpr uint64_t SlotsOffsetFor(uint32_t slot_count) {
  return AlignUp(OrderOffset() + uint64_t{slot_count} * sizeof(uint32_t), kCacheLine);
}

constexpr uint64_t RingBytesFor(uint32_t slot_count, uint64_t slot_size) {
  return SlotsOffsetFor(slot_count) + uint64_t{slot_count} * slot_size;
}

}  // namespace ember::ring

#endif  // EMBER_RING_LAYOUT_H_
