// Fuzzes the SDK's ring-header and slot validation: the input becomes a ring (a memfd)
// that OpenRingReader maps and checks, then Next() takes its batches until it would
// wait, and every tensor byte it hands out is read (the order table and the
// publication count come from the input too). Input: a flags byte, then the ring's
// bytes, padded with zeros to whole pages (so a read past the mapping faults).
//   flags bit 0 clear: StreamInfo is what the header says (slot_count, slot_size,
//     batches_per_epoch), as emberd would announce; set: it is read from the input
//     first (u32 slot_count, u32 slot_size, u32 batches_per_epoch).
//   flags bit 1 clear: the header's total_bytes is set to the ring's size first.
//   flags bit 2 set: batches are held until the end (their slots stay kReading).
//   flags bit 3 set: a share group's memfd of kSharedPages pages is passed along, for the
//     header's shared regions (shared_count, shared[]) and the tensors whose region is not
//     0; clear: none.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/fuzz_input.h"
#include "ember/ring_layout.h"
#include "ember/stream_reader.h"
#include "sdk/src/ring_reader.h"

namespace ember::sdk {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kSharedPages = 4;

// A share group's memfd of kSharedPages pages of patterned bytes; -1 if none can be made.
int SharedMemory() {
  std::string bytes(kSharedPages * kPage, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + i / kPage);
  const int fd = memfd_create("ring_reader_fuzz_shared", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads every byte of the batch's tensors.
uint32_t Touch(const RawBatch& batch) {
  uint32_t sum = 0;
  for (const RawTensor& tensor : batch.tensors) {
    const auto* p = static_cast<const uint8_t*>(tensor.data);
    for (uint64_t i = 0; i < tensor.nbytes; ++i) sum += p[i];
  }
  return sum;
}

// True if the ring counts no publication past the batches read (Next() would wait).
bool NothingPublished(const StreamReader& reader) {
  const auto* header = static_cast<const ring::RingHeader*>(reader.ring_base());
  const uint32_t publications = header->publications.load(std::memory_order_acquire);
  return static_cast<int32_t>(publications - static_cast<uint32_t>(reader.batches_read())) <= 0;
}

}  // namespace
}  // namespace ember::sdk

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  using namespace ember::sdk;
  FuzzInput input(data, size);
  const uint8_t flags = input.Byte();
  StreamInfo info;
  if ((flags & 1) != 0) {
    info.slot_count = input.U32();
    info.slot_size = input.U32();
    info.batches_per_epoch = input.U32();
  }
  std::string ring_bytes = input.Rest();
  ring_bytes.resize(std::max(kPage, (ring_bytes.size() + kPage - 1) / kPage * kPage));
  auto* header = reinterpret_cast<ring::RingHeader*>(ring_bytes.data());
  if ((flags & 1) == 0) {
    info.slot_count = header->slot_count;
    info.slot_size = header->slot_size;
    info.batches_per_epoch = header->batches_per_epoch;
  }
  if ((flags & 2) == 0) header->total_bytes = ring_bytes.size();
  info.ring_bytes = ring_bytes.size();

  const int fd = memfd_create("ring_reader_fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (pwrite(fd, ring_bytes.data(), ring_bytes.size(), 0) !=
      static_cast<ssize_t>(ring_bytes.size())) {
    close(fd);
    return 0;
  }
  const int shared_fd = (flags & 8) != 0 ? SharedMemory() : -1;
  Result<std::unique_ptr<StreamReader>> reader =
      OpenRingReader(fd, shared_fd, info, [] { return true; }, nullptr);
  if (!reader.ok()) return 0;
  std::vector<RawBatch> held;
  for (uint32_t i = 0; i < 2 * info.slot_count + 4 && !(*reader)->ended(); ++i) {
    if (NothingPublished(**reader)) break;
    Result<std::optional<RawBatch>> batch = (*reader)->Next();
    if (!batch.ok() || !batch->has_value()) continue;
    (void)Touch(**batch);
    if ((flags & 4) != 0) held.push_back(std::move(**batch));
  }
  return 0;
}
