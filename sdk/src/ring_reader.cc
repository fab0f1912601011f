#include "sdk/src/ring_reader.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <string>

#include "ember/ring_layout.h"
#include "ember/ring_sync.h"

namespace ember {

// Unmaps the ring when the reader and every batch viewing it are gone.
class RingMapping {
 public:
  RingMapping(void* base, size_t size) : base_(base), size_(size) {}
  ~RingMapping() { munmap(base_, size_); }
  void* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  void* base_;
  size_t size_;
};

class SlotLease {
 public:
  SlotLease(std::shared_ptr<RingMapping> mapping, ring::SlotHeader* slot)
      : mapping_(std::move(mapping)), slot_(slot) {}
  ~SlotLease() { ring::SetSlotState(slot_, ring::kFree); }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;

 private:
  std::shared_ptr<RingMapping> mapping_;
  ring::SlotHeader* slot_;
};

namespace sdk {
namespace {

using Clock = std::chrono::steady_clock;

class RingReader final : public StreamReader {
 public:
  RingReader(std::shared_ptr<RingMapping> mapping, const StreamInfo& info,
             std::function<bool()> alive, std::shared_ptr<void> stream_handle)
      : mapping_(std::move(mapping)),
        header_(static_cast<ring::RingHeader*>(mapping_->base())),
        info_(info),
        alive_(std::move(alive)),
        stream_handle_(std::move(stream_handle)) {}

  ~RingReader() override {
    // Drop the daemon-side stream first; batches still alive keep the mapping.
    stream_handle_.reset();
  }

  Result<std::optional<RawBatch>> Next() override {
    if (ended_) return end_status_.ok() ? Result<std::optional<RawBatch>>(std::nullopt)
                                        : Result<std::optional<RawBatch>>(end_status_);
    if (epoch_over_) {
      epoch_over_ = false;
      return std::optional<RawBatch>();
    }
    ring::SlotHeader* slot = Slot(next_sequence_ % header_->slot_count);
    const auto wait_start = Clock::now();
    uint32_t state = slot->state.load(std::memory_order_acquire);
    while (state != ring::kReady && state != ring::kEnd) {
      if (state == ring::kReading) {
        if (!alive_()) return Lost(wait_start);
        return FailedPrecondition(
            "all " + std::to_string(header_->slot_count) +
            " ring slots are held by live batches; release older batches before taking more "
            "(or open the stream with more slots)");
      }
      state = ring::WaitWhileState(slot, state, std::chrono::milliseconds(100));
      if (state == ring::kFree && !alive_()) return Lost(wait_start);
    }
    wait_time_ += Clock::now() - wait_start;
    if (state == ring::kEnd) return End(slot);
    auto batch = Take(slot);
    if (!batch.ok()) {
      ended_ = true;
      end_status_ = batch.status();
      return end_status_;
    }
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
    return reinterpret_cast<ring::SlotHeader*>(base + header_->slots_offset +
                                               i * header_->slot_size);
  }

  Result<std::optional<RawBatch>> Lost(Clock::time_point wait_start) {
    wait_time_ += Clock::now() - wait_start;
    ended_ = true;
    end_status_ = Unavailable("lost the connection to emberd while waiting for a batch");
    return end_status_;
  }

  Result<std::optional<RawBatch>> End(ring::SlotHeader* slot) {
    ended_ = true;
    std::string message(slot->end_message,
                        strnlen(slot->end_message, ring::kEndMessageBytes));
    switch (slot->end_status) {
      case ring::kEndComplete: return std::optional<RawBatch>();
      case ring::kEndCancelled: end_status_ = Cancelled(message); break;
      default: end_status_ = DataLoss("emberd stopped the stream: " + message); break;
    }
    return end_status_;
  }

  Result<RawBatch> Take(ring::SlotHeader* slot) {
    // The slot header is written by another process: check it before trusting it.
    if (slot->num_tensors > ring::kMaxTensors)
      return DataLoss("ring slot claims " + std::to_string(slot->num_tensors) + " tensors");
    RawBatch batch;
    batch.epoch = slot->epoch;
    batch.index_in_epoch = slot->index_in_epoch;
    batch.last_in_epoch = slot->last_in_epoch != 0;
    batch.num_samples = slot->num_samples;
    auto* slot_bytes = reinterpret_cast<uint8_t*>(slot);
    for (uint32_t t = 0; t < slot->num_tensors; ++t) {
      const ring::TensorDesc& d = slot->tensors[t];
      const size_t elem = ring::DTypeSize(static_cast<ring::DType>(d.dtype));
      if (elem == 0 || d.ndim == 0 || d.ndim > ring::kMaxDims)
        return DataLoss("ring slot tensor " + std::to_string(t) + " has a bad dtype or rank");
      uint64_t n = elem;
      RawTensor tensor;
      for (uint32_t k = 0; k < d.ndim; ++k) {
        if (d.shape[k] < 0) return DataLoss("ring slot tensor has a negative dimension");
        n *= static_cast<uint64_t>(d.shape[k]);
        tensor.shape.push_back(d.shape[k]);
      }
      if (n != d.nbytes || d.offset < header_->payload_offset ||
          d.offset > header_->slot_size || d.nbytes > header_->slot_size - d.offset)
        return DataLoss("ring slot tensor " + std::to_string(t) + " lies outside its slot");
      tensor.name.assign(d.name, strnlen(d.name, ring::kNameBytes));
      tensor.dtype = static_cast<ring::DType>(d.dtype);
      tensor.data = slot_bytes + d.offset;
      tensor.nbytes = d.nbytes;
      batch.tensors.push_back(std::move(tensor));
    }
    slot->state.store(ring::kReading, std::memory_order_relaxed);
    batch.lease = std::make_shared<SlotLease>(mapping_, slot);
    header_->consumed.fetch_add(1, std::memory_order_relaxed);
    ++next_sequence_;
    ++batches_read_;
    if (batch.last_in_epoch) epoch_over_ = true;
    return batch;
  }

  std::shared_ptr<RingMapping> mapping_;
  ring::RingHeader* header_;
  StreamInfo info_;
  std::function<bool()> alive_;
  std::shared_ptr<void> stream_handle_;
  uint64_t next_sequence_ = 0;
  uint64_t batches_read_ = 0;
  bool epoch_over_ = false;
  bool ended_ = false;
  Status end_status_;
  std::chrono::nanoseconds wait_time_{0};
};

}  // namespace

Result<std::unique_ptr<StreamReader>> OpenRingReader(int fd, const StreamInfo& info,
                                                     std::function<bool()> alive,
                                                     std::shared_ptr<void> stream_handle) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus("ring fd", err);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < sizeof(ring::RingHeader) || size != info.ring_bytes) {
    close(fd);
    return DataLoss("ring has " + std::to_string(size) + " bytes, emberd announced " +
                    std::to_string(info.ring_bytes));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (base == MAP_FAILED) return ErrnoStatus("mmap of the ring", err);
  auto mapping = std::make_shared<RingMapping>(base, size);
  auto* header = static_cast<ring::RingHeader*>(base);
  if (header->magic != ring::kMagic || header->version != ring::kVersion)
    return DataLoss("ring header has magic/version " + std::to_string(header->magic) + "/" +
                    std::to_string(header->version) + ", expected version " +
                    std::to_string(ring::kVersion) + " (emberd and SDK versions differ?)");
  if (header->slot_count == 0 || header->slot_size < header->payload_offset ||
      header->slots_offset + uint64_t{header->slot_count} * header->slot_size > size)
    return DataLoss("ring header geometry does not fit its mapping");
  return std::unique_ptr<StreamReader>(
      new RingReader(std::move(mapping), info, std::move(alive), std::move(stream_handle)));
}

}  // namespace sdk
}  // namespace ember
