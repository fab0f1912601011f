#include "sdk/src/ring_reader.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ember/ring_layout.h"
#include "ember/ring_sync.h"

namespace ember {

// Unmaps the ring and its shared regions when the reader and every batch viewing them
// are gone. Counts the slots handed back, so that the reader knows how many its batches
// hold without trusting the shared header.
class RingMapping {
 public:
  // A shared region: `bytes` of the share group's memfd mapped twice, read-only, at
  // [base, base + bytes) and [base + bytes, base + 2 * bytes).
  struct Region {
    uint8_t* base = nullptr;
    uint64_t bytes = 0;
  };

  RingMapping(void* base, size_t size) : base_(base), size_(size) {}
  ~RingMapping() {
    for (const Region& region : regions_) munmap(region.base, 2 * region.bytes);
    munmap(base_, size_);
  }
  void* base() const { return base_; }
  size_t size() const { return size_; }
  ring::RingHeader* header() const { return static_cast<ring::RingHeader*>(base_); }
  std::atomic<uint64_t>& released() { return released_; }
  // Mapped at open (before any batch exists); the mapping unmaps them.
  const std::vector<Region>& regions() const { return regions_; }
  void AddRegion(Region region) { regions_.push_back(region); }

 private:
  void* base_;
  size_t size_;
  std::vector<Region> regions_;
  std::atomic<uint64_t> released_{0};
};

class SlotHandle {
 public:
  SlotHandle(std::shared_ptr<RingMapping> mapping, ring::SlotHeader* slot)
      : mapping_(std::move(mapping)), slot_(slot) {}
  ~SlotHandle() {
    mapping_->released().fetch_add(1, std::memory_order_relaxed);
    ring::ReleaseSlot(mapping_->header(), slot_);
  }
  SlotHandle(const SlotHandle&) = delete;
  SlotHandle& operator=(const SlotHandle&) = delete;

 private:
  std::shared_ptr<RingMapping> mapping_;
  ring::SlotHeader* slot_;
};

namespace sdk {
namespace {

using Clock = std::chrono::steady_clock;

std::string Hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
  return buf;
}

// The ring's geometry, checked once at open and copied out of the shared header, so
// that a writer changing the header later cannot move the reader outside its mapping.
struct Geometry {
  uint32_t slot_count = 0;
  uint64_t slot_size = 0;
  uint64_t slots_offset = 0;
  uint64_t payload_offset = 0;
  uint64_t order_offset = 0;
};

Status BadHeader(const std::string& field, const std::string& what) {
  return DataLoss("ring header: " + field + " " + what);
}

// The header's plain fields, each read once from the shared mapping (the writer may
// change them between two reads).
struct HeaderFields {
  uint64_t magic, slot_size, slots_offset, payload_offset, total_bytes, batches_per_epoch,
      order_offset;
  uint32_t version, slot_count, shared_count;
  ring::SharedRegion shared[ring::kMaxTensors];
};

HeaderFields ReadHeader(const ring::RingHeader& header) {
  HeaderFields f;
  f.magic = header.magic;
  f.version = header.version;
  f.slot_count = header.slot_count;
  f.slot_size = header.slot_size;
  f.slots_offset = header.slots_offset;
  f.payload_offset = header.payload_offset;
  f.total_bytes = header.total_bytes;
  f.batches_per_epoch = header.batches_per_epoch;
  f.order_offset = header.order_offset;
  f.shared_count = header.shared_count;
  for (uint32_t i = 0; i < ring::kMaxTensors; ++i) {
    f.shared[i].offset = header.shared[i].offset;
    f.shared[i].bytes = header.shared[i].bytes;
  }
  return f;
}

// Checks every header field against the layout, the mapping's `size` and what emberd
// announced in `info`; kDataLoss naming the first bad field.
Result<Geometry> CheckHeader(const HeaderFields& h, uint64_t size, const StreamInfo& info) {
  using std::to_string;
  if (h.magic != ring::kMagic)
    return BadHeader("magic", "is " + Hex(h.magic) + ", expected " + Hex(ring::kMagic) +
                                  " (not an Ember ring)");
  if (h.version != ring::kVersion)
    return BadHeader("version", "is " + to_string(h.version) + ", this SDK reads " +
                                    to_string(ring::kVersion) +
                                    " (emberd and SDK versions differ?)");
  if (h.total_bytes != size)
    return BadHeader("total_bytes", "is " + to_string(h.total_bytes) +
                                        " but the mapping has " + to_string(size) + " bytes");
  if (h.slot_count == 0 || h.slot_count != info.slot_count)
    return BadHeader("slot_count", "is " + to_string(h.slot_count) + ", emberd announced " +
                                       to_string(info.slot_count));
  if (h.slot_size != info.slot_size)
    return BadHeader("slot_size", "is " + to_string(h.slot_size) + ", emberd announced " +
                                      to_string(info.slot_size));
  if (h.batches_per_epoch != info.batches_per_epoch)
    return BadHeader("batches_per_epoch", "is " + to_string(h.batches_per_epoch) +
                                              ", emberd announced " +
                                              to_string(info.batches_per_epoch));
  if (h.payload_offset < sizeof(ring::SlotHeader) || h.payload_offset % ring::kCacheLine != 0)
    return BadHeader("payload_offset", "is " + to_string(h.payload_offset) +
                                           ": not a multiple of " + to_string(ring::kCacheLine) +
                                           " at or past the " +
                                           to_string(sizeof(ring::SlotHeader)) +
                                           "-byte slot header");
  if (h.slot_size < h.payload_offset || h.slot_size % ring::kCacheLine != 0)
    return BadHeader("slot_size", "is " + to_string(h.slot_size) + ": not a multiple of " +
                                      to_string(ring::kCacheLine) + " holding payload_offset " +
                                      to_string(h.payload_offset));
  if (h.slots_offset < sizeof(ring::RingHeader) || h.slots_offset % ring::kCacheLine != 0 ||
      h.slots_offset > size)
    return BadHeader("slots_offset", "is " + to_string(h.slots_offset) +
                                         ": not a multiple of " + to_string(ring::kCacheLine) +
                                         " between the " + to_string(sizeof(ring::RingHeader)) +
                                         "-byte ring header and the mapping's end at " +
                                         to_string(size));
  // Division, not multiplication: slot_count * slot_size may not fit 64 bits.
  if (h.slot_size > (size - h.slots_offset) / h.slot_count)
    return BadHeader("slot_count", to_string(h.slot_count) + " x slot_size " +
                                       to_string(h.slot_size) + " from slots_offset " +
                                       to_string(h.slots_offset) + " do not fit the mapping's " +
                                       to_string(size) + " bytes");
  if (h.order_offset < sizeof(ring::RingHeader) || h.order_offset % sizeof(uint32_t) != 0 ||
      h.order_offset > h.slots_offset ||
      uint64_t{h.slot_count} > (h.slots_offset - h.order_offset) / sizeof(uint32_t))
    return BadHeader("order_offset", "is " + to_string(h.order_offset) + ": the order table of " +
                                         to_string(h.slot_count) +
                                         " slot indexes does not fit between the " +
                                         to_string(sizeof(ring::RingHeader)) +
                                         "-byte ring header and slots_offset " +
                                         to_string(h.slots_offset));
  if (h.shared_count > ring::kMaxTensors)
    return BadHeader("shared_count", "is " + to_string(h.shared_count) + ", at most " +
                                         to_string(ring::kMaxTensors) + " shared regions");
  Geometry g;
  g.slot_count = h.slot_count;
  g.slot_size = h.slot_size;
  g.slots_offset = h.slots_offset;
  g.payload_offset = h.payload_offset;
  g.order_offset = h.order_offset;
  return g;
}

// Maps `bytes` of `fd` from `offset` twice back to back, read-only: a reservation of
// 2 * bytes (PROT_NONE) with the region mapped over each half.
Result<uint8_t*> MapTwice(int fd, uint64_t offset, uint64_t bytes, const std::string& what) {
  void* reserved =
      mmap(nullptr, 2 * bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED)
    return ErrnoStatus("reserving " + std::to_string(2 * bytes) + " bytes for " + what, errno);
  auto* base = static_cast<uint8_t*>(reserved);
  for (uint64_t half : {uint64_t{0}, bytes}) {
    if (mmap(base + half, bytes, PROT_READ, MAP_SHARED | MAP_FIXED, fd,
             static_cast<off_t>(offset)) == MAP_FAILED) {
      const int err = errno;
      munmap(reserved, 2 * bytes);
      return ErrnoStatus("mmap of " + what, err);
    }
  }
  return base;
}

// Checks the header's shared regions against the share group's memfd `shared_fd` (-1:
// none) and maps each twice into `mapping`; kDataLoss naming the first bad field.
Status MapSharedRegions(const HeaderFields& h, int shared_fd, RingMapping& mapping) {
  using std::to_string;
  if (h.shared_count == 0) return Status::Ok();
  if (shared_fd < 0)
    return BadHeader("shared_count", "is " + to_string(h.shared_count) +
                                         " but emberd sent no share group memory to map the "
                                         "shared regions from");
  struct stat st;
  if (fstat(shared_fd, &st) != 0) return ErrnoStatus("share group fd", errno);
  const auto size = static_cast<uint64_t>(st.st_size);
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  for (uint32_t i = 0; i < h.shared_count; ++i) {
    const std::string field = "shared[" + to_string(i) + "].";
    const uint64_t offset = h.shared[i].offset, bytes = h.shared[i].bytes;
    if (offset % page != 0 || offset >= size)
      return BadHeader(field + "offset", "is " + to_string(offset) + ": not a multiple of " +
                                             to_string(page) + " inside the share group's " +
                                             to_string(size) + " bytes");
    if (bytes == 0 || bytes % page != 0 || bytes > size - offset)
      return BadHeader(field + "bytes", "is " + to_string(bytes) + ": not a positive multiple of " +
                                            to_string(page) + " that fits the share group's " +
                                            to_string(size) + " bytes from offset " +
                                            to_string(offset));
    EMBER_ASSIGN_OR_RETURN(uint8_t* base,
                           MapTwice(shared_fd, offset, bytes, "shared region " + to_string(i)));
    mapping.AddRegion({base, bytes});
  }
  return Status::Ok();
}

class RingReader final : public StreamReader {
 public:
  RingReader(std::shared_ptr<RingMapping> mapping, const Geometry& geometry,
             const StreamInfo& info, std::function<bool()> alive,
             std::shared_ptr<void> stream_handle)
      : mapping_(std::move(mapping)),
        header_(mapping_->header()),
        order_(reinterpret_cast<const uint32_t*>(static_cast<uint8_t*>(mapping_->base()) +
                                                 geometry.order_offset)),
        geometry_(geometry),
        info_(info),
        alive_(std::move(alive)),
        stream_handle_(std::move(stream_handle)) {}

  ~RingReader() override {
    // Drop the daemon-side stream first; batches still alive keep the mapping.
    stream_handle_.reset();
  }

  using StreamReader::Next;
  Result<std::optional<RawBatch>> Next(const WaitCheck& check) override {
    if (ended_) return end_status_.ok() ? Result<std::optional<RawBatch>>(std::nullopt)
                                        : Result<std::optional<RawBatch>>(end_status_);
    if (epoch_over_) {
      epoch_over_ = false;
      return std::optional<RawBatch>();
    }
    const auto wait_start = Clock::now();
    bool stalled = false;
    uint32_t publications = header_->publications.load(std::memory_order_acquire);
    // Until the writer has counted batch next_sequence_ as published.
    while (static_cast<int32_t>(publications - static_cast<uint32_t>(next_sequence_)) <= 0) {
      if (held() >= geometry_.slot_count) {
        if (!alive_()) return Lost(wait_start);
        return FailedPrecondition(
            "all " + std::to_string(geometry_.slot_count) +
            " ring slots are held by live batches; release older batches before taking more "
            "(or open the stream with more slots)");
      }
      if (!stalled) {
        stalled = true;
        header_->reader_stalls.fetch_add(1, std::memory_order_relaxed);
      }
      const uint32_t seen =
          ring::WaitForPublication(header_, publications, std::chrono::milliseconds(100));
      if (seen == publications) {
        if (!alive_()) return Lost(wait_start);
        if (check) {
          Status checked = check();
          if (!checked.ok()) {
            AddWait(wait_start);
            return checked;
          }
        }
      }
      publications = seen;
    }
    AddWait(wait_start);
    slot_index_ = order_[next_sequence_ % geometry_.slot_count];
    if (slot_index_ >= geometry_.slot_count)
      return Fail(DataLoss("ring order[" + std::to_string(next_sequence_ % geometry_.slot_count) +
                           "] (batch " + std::to_string(next_sequence_) + ") is slot " +
                           std::to_string(slot_index_) + ", not one of the " +
                           std::to_string(geometry_.slot_count)));
    ring::SlotHeader* slot = Slot(slot_index_);
    const uint32_t state = slot->state.load(std::memory_order_acquire);
    if (state == ring::kEnd) return End(slot);
    if (state != ring::kReady)
      return Fail(BadSlot("state", "is " + std::to_string(state) + ", not a published slot's"));
    auto batch = Take(slot);
    if (!batch.ok()) return Fail(batch.status());
    return std::optional<RawBatch>(std::move(batch).value());
  }

  bool ended() const override { return ended_; }
  const StreamInfo& info() const override { return info_; }
  const void* ring_base() const override { return mapping_->base(); }
  size_t ring_size() const override { return mapping_->size(); }
  std::chrono::nanoseconds wait_time() const override { return wait_time_; }
  uint64_t batches_read() const override { return batches_read_; }

 private:
  ring::SlotHeader* Slot(uint64_t i) const {
    auto* base = static_cast<uint8_t*>(mapping_->base());
    return reinterpret_cast<ring::SlotHeader*>(base + geometry_.slots_offset +
                                               i * geometry_.slot_size);
  }

  // Adds the time since `wait_start` to wait_time_ and publishes the total in the ring
  // header, where emberd reports it as the stream's data stall.
  void AddWait(Clock::time_point wait_start) {
    wait_time_ += Clock::now() - wait_start;
    header_->reader_wait_nanos.store(static_cast<uint64_t>(wait_time_.count()),
                                     std::memory_order_relaxed);
  }

  // Batches taken and not handed back yet.
  uint64_t held() const {
    return batches_read_ - mapping_->released().load(std::memory_order_relaxed);
  }

  // kDataLoss naming a field of the slot that holds sequence number next_sequence_.
  Status BadSlot(const std::string& field, const std::string& what) const {
    return DataLoss("ring slot " + std::to_string(slot_index_) +
                    " (batch " + std::to_string(next_sequence_) + "): " + field + " " + what);
  }

  Result<std::optional<RawBatch>> Fail(Status status) {
    ended_ = true;
    end_status_ = std::move(status);
    return end_status_;
  }

  Result<std::optional<RawBatch>> Lost(Clock::time_point wait_start) {
    AddWait(wait_start);
    return Fail(Unavailable("lost the connection to emberd while waiting for a batch"));
  }

  Result<std::optional<RawBatch>> End(ring::SlotHeader* slot) {
    std::string message(slot->end_message,
                        strnlen(slot->end_message, ring::kEndMessageBytes));
    const uint32_t end_status = slot->end_status;
    switch (end_status) {
      case ring::kEndComplete: ended_ = true; return std::optional<RawBatch>();
      case ring::kEndCancelled: return Fail(Cancelled(message));
      case ring::kEndError: return Fail(DataLoss("emberd stopped the stream: " + message));
    }
    return Fail(BadSlot("end_status", "is " + std::to_string(end_status) +
                                          ", not an end status (message: " + message + ")"));
  }

  // Checks one tensor descriptor (a copy: the shared one may change under us) against
  // the slot's geometry (or its shared region's) and its batch's `num_samples`.
  Result<RawTensor> CheckTensor(uint32_t t, const ring::TensorDesc& d, uint32_t num_samples,
                                uint8_t* slot_bytes) const {
    using std::to_string;
    const std::string tensor = "tensors[" + to_string(t) + "].";
    const size_t elem = ring::DTypeSize(static_cast<ring::DType>(d.dtype));
    if (elem == 0) return BadSlot(tensor + "dtype", "is " + to_string(d.dtype) + ", not a dtype");
    if (d.ndim == 0 || d.ndim > ring::kMaxDims)
      return BadSlot(tensor + "ndim", "is " + to_string(d.ndim) + ", not 1.." +
                                          to_string(ring::kMaxDims));
    RawTensor out;
    uint64_t n = elem;
    for (uint32_t k = 0; k < d.ndim; ++k) {
      const std::string dim = tensor + "shape[" + to_string(k) + "]";
      if (d.shape[k] < 0) return BadSlot(dim, "is negative (" + to_string(d.shape[k]) + ")");
      const auto extent = static_cast<uint64_t>(d.shape[k]);
      if (extent != 0 && n > std::numeric_limits<uint64_t>::max() / extent)
        return BadSlot(dim, "is " + to_string(d.shape[k]) + ": the tensor's size overflows");
      n *= extent;
      out.shape.push_back(d.shape[k]);
    }
    if (d.shape[0] != static_cast<int64_t>(num_samples))
      return BadSlot(tensor + "shape[0]", "is " + to_string(d.shape[0]) + " but num_samples is " +
                                              to_string(num_samples));
    if (d.nbytes != n)
      return BadSlot(tensor + "nbytes", "is " + to_string(d.nbytes) + " but its shape and dtype "
                                            "make " + to_string(n));
    out.name.assign(d.name, strnlen(d.name, ring::kNameBytes));
    out.dtype = static_cast<ring::DType>(d.dtype);
    out.nbytes = d.nbytes;
    if (d.region != 0) {
      // In a shared region, mapped twice: rows that wrap past its end are contiguous.
      const std::vector<RingMapping::Region>& regions = mapping_->regions();
      if (d.region > regions.size())
        return BadSlot(tensor + "region", "is " + to_string(d.region) + ", but the ring has " +
                                              to_string(regions.size()) + " shared regions");
      const RingMapping::Region& region = regions[d.region - 1];
      if (d.offset >= region.bytes)
        return BadSlot(tensor + "offset", "is " + to_string(d.offset) + ": past shared region " +
                                              to_string(d.region - 1) + "'s " +
                                              to_string(region.bytes) + " bytes");
      if (d.nbytes > 2 * region.bytes - d.offset)
        return BadSlot(tensor + "nbytes", "is " + to_string(d.nbytes) + ": from offset " +
                                              to_string(d.offset) + " it runs past shared region " +
                                              to_string(d.region - 1) + " mapped twice (2 x " +
                                              to_string(region.bytes) + " bytes)");
      out.data = region.base + d.offset;
      return out;
    }
    if (d.offset < geometry_.payload_offset || d.offset % ring::kCacheLine != 0 ||
        d.offset > geometry_.slot_size)
      return BadSlot(tensor + "offset", "is " + to_string(d.offset) + ": not a multiple of " +
                                            to_string(ring::kCacheLine) + " in the payload [" +
                                            to_string(geometry_.payload_offset) + ", " +
                                            to_string(geometry_.slot_size) + ")");
    if (d.nbytes > geometry_.slot_size - d.offset)
      return BadSlot(tensor + "nbytes", "is " + to_string(d.nbytes) + ": from offset " +
                                            to_string(d.offset) + " it runs past the " +
                                            to_string(geometry_.slot_size) + "-byte slot");
    out.data = slot_bytes + d.offset;
    return out;
  }

  Result<RawBatch> Take(ring::SlotHeader* slot) {
    // The slot header is written by another process: check it before trusting it, and
    // read each field once.
    const uint64_t sequence = slot->sequence;
    if (sequence != next_sequence_)
      return BadSlot("sequence", "is " + std::to_string(sequence) + ", expected " +
                                     std::to_string(next_sequence_));
    const uint32_t num_tensors = slot->num_tensors;
    if (num_tensors > ring::kMaxTensors)
      return BadSlot("num_tensors", "is " + std::to_string(num_tensors) + ", at most " +
                                        std::to_string(ring::kMaxTensors) + " fit a slot");
    RawBatch batch;
    batch.epoch = slot->epoch;
    batch.index_in_epoch = slot->index_in_epoch;
    batch.last_in_epoch = slot->last_in_epoch != 0;
    batch.position = slot->position;
    batch.num_samples = slot->num_samples;
    auto* slot_bytes = reinterpret_cast<uint8_t*>(slot);
    for (uint32_t t = 0; t < num_tensors; ++t) {
      const ring::TensorDesc desc = slot->tensors[t];
      EMBER_ASSIGN_OR_RETURN(RawTensor tensor,
                             CheckTensor(t, desc, batch.num_samples, slot_bytes));
      batch.tensors.push_back(std::move(tensor));
    }
    slot->state.store(ring::kReading, std::memory_order_relaxed);
    batch.slot = std::make_shared<SlotHandle>(mapping_, slot);
    header_->consumed.fetch_add(1, std::memory_order_relaxed);
    ++next_sequence_;
    ++batches_read_;
    if (batch.last_in_epoch) epoch_over_ = true;
    return batch;
  }

  std::shared_ptr<RingMapping> mapping_;
  ring::RingHeader* header_;
  const uint32_t* const order_;
  const Geometry geometry_;
  StreamInfo info_;
  std::function<bool()> alive_;
  std::shared_ptr<void> stream_handle_;
  uint64_t next_sequence_ = 0;
  uint32_t slot_index_ = 0;  // the slot of batch next_sequence_, once published
  uint64_t batches_read_ = 0;
  bool epoch_over_ = false;
  bool ended_ = false;
  Status end_status_;
  std::chrono::nanoseconds wait_time_{0};
};

}  // namespace

Result<std::unique_ptr<StreamReader>> OpenRingReader(int fd, int shared_fd,
                                                     const StreamInfo& info,
                                                     std::function<bool()> alive,
                                                     std::shared_ptr<void> stream_handle) {
  // Closes the share group's fd on every path: its regions stay mapped.
  struct SharedFd {
    int fd;
    ~SharedFd() {
      if (fd >= 0) close(fd);
    }
  } shared{shared_fd};
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus("ring fd", err);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < sizeof(ring::RingHeader) || size != info.ring_bytes) {
    close(fd);
    return DataLoss("ring: the mapping has " + std::to_string(size) +
                    " bytes, emberd announced ring_bytes " + std::to_string(info.ring_bytes));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (base == MAP_FAILED) return ErrnoStatus("mmap of the ring", err);
  auto mapping = std::make_shared<RingMapping>(base, size);
  const HeaderFields fields = ReadHeader(*static_cast<const ring::RingHeader*>(base));
  EMBER_ASSIGN_OR_RETURN(Geometry geometry, CheckHeader(fields, size, info));
  EMBER_RETURN_IF_ERROR(MapSharedRegions(fields, shared.fd, *mapping));
  return std::unique_ptr<StreamReader>(new RingReader(std::move(mapping), geometry, info,
                                                      std::move(alive),
                                                      std::move(stream_handle)));
}

}  // namespace sdk
}  // namespace ember
