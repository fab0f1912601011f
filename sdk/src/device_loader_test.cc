// DeviceLoader over a ring that the test writes itself (the daemon's part), read back
// through the SDK's ring reader. The GPU cases skip (with a SKIP warning) when no CUDA
// device is visible; the no-GPU case runs only there.
#include "ember/device_loader.h"

#include <sys/mman.h>
#include <unistd.h>

#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/cuda.h>
#include <torch/torch.h>
// After LibTorch: c10/util/Logging.h defines a CHECK of its own (a fatal check Catch
// never counts or reports), and whichever header comes last decides what CHECK means.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ember/ring_layout.h"
#include "ember/ring_sync.h"
#include "sdk/src/ring_reader.h"

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;

// Batch `seq`: "image" uint8 [rows, cols] and "label" int64 [rows], contents derived
// from seq so that every byte can be checked.
uint8_t ImageByte(uint64_t seq, uint64_t i) {
  return static_cast<uint8_t>((i * 7 + seq * 13) % 251);
}
int64_t Label(uint64_t seq, uint64_t row) { return static_cast<int64_t>(seq * 1000 + row); }

// A ring in a memfd, written by the test the way emberd writes it.
class TestRing {
 public:
  TestRing(uint32_t slots, int64_t rows, int64_t cols, uint64_t batches_per_epoch)
      : slots_(slots), rows_(rows), cols_(cols), batches_per_epoch_(batches_per_epoch) {
    image_bytes_ = static_cast<uint64_t>(rows * cols);
    label_offset_ = ring::AlignUp(image_bytes_, ring::kCacheLine);
    slot_size_ = ring::SlotSizeFor(label_offset_ + rows * sizeof(int64_t));
    bytes_ = ring::RingBytesFor(slots, slot_size_);
    fd_ = memfd_create("ember-device-loader-test", MFD_CLOEXEC);
    REQUIRE(fd_ >= 0);
    REQUIRE(ftruncate(fd_, static_cast<off_t>(bytes_)) == 0);
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    REQUIRE(base != MAP_FAILED);
    base_ = static_cast<uint8_t*>(base);
    auto* header = reinterpret_cast<ring::RingHeader*>(base_);
    header->magic = ring::kMagic;
    header->version = ring::kVersion;
    header->slot_count = slots;
    header->slot_size = slot_size_;
    header->order_offset = ring::OrderOffset();
    header->slots_offset = ring::SlotsOffsetFor(slots);
    header->payload_offset = ring::AlignUp(sizeof(ring::SlotHeader), ring::kCacheLine);
    header->total_bytes = bytes_;
    header->batches_per_epoch = batches_per_epoch;
  }

  ~TestRing() {
    munmap(base_, bytes_);
    close(fd_);
  }

  ring::SlotHeader* Slot(uint64_t seq) const {
    auto* header = reinterpret_cast<ring::RingHeader*>(base_);
    return reinterpret_cast<ring::SlotHeader*>(base_ + header->slots_offset +
                                               (seq % slots_) * slot_size_);
  }

  // Writes batch `seq` into its slot once the reader has handed the slot back (false if
  // that took over 10 s).
  bool Publish(uint64_t seq) {
    ring::SlotHeader* slot = Slot(seq);
    if (!WaitFree(slot)) return false;
    slot->num_tensors = 2;
    slot->num_samples = static_cast<uint32_t>(rows_);
    slot->epoch = seq / batches_per_epoch_;
    slot->index_in_epoch = seq % batches_per_epoch_;
    slot->last_in_epoch = slot->index_in_epoch + 1 == batches_per_epoch_ ? 1 : 0;
    const uint64_t payload = ring::AlignUp(sizeof(ring::SlotHeader), ring::kCacheLine);
    Describe(slot->tensors[0], "image", ring::DType::kUInt8, {rows_, cols_}, payload, image_bytes_);
    Describe(slot->tensors[1], "label", ring::DType::kInt64, {rows_}, payload + label_offset_,
             rows_ * sizeof(int64_t));
    uint8_t* image = reinterpret_cast<uint8_t*>(slot) + payload;
    for (uint64_t i = 0; i < image_bytes_; ++i) image[i] = ImageByte(seq, i);
    auto* label = reinterpret_cast<int64_t*>(image + label_offset_);
    for (int64_t r = 0; r < rows_; ++r) label[r] = Label(seq, r);
    ring::PublishSlot(Header(), Order(), slots_, seq % slots_, slot, seq, ring::kReady);
    return true;
  }

  bool PublishEnd(uint64_t seq) {
    ring::SlotHeader* slot = Slot(seq);
    if (!WaitFree(slot)) return false;
    slot->end_status = ring::kEndComplete;
    ring::PublishSlot(Header(), Order(), slots_, seq % slots_, slot, seq, ring::kEnd);
    return true;
  }

  std::unique_ptr<StreamReader> Reader() const {
    StreamInfo info;
    info.slot_count = slots_;
    info.slot_size = slot_size_;
    info.ring_bytes = bytes_;
    info.batches_per_epoch = batches_per_epoch_;
    auto reader = sdk::OpenRingReader(dup(fd_), -1, info, [] { return true; }, nullptr);
    REQUIRE(reader.ok());
    return std::move(reader).value();
  }

  // The batch's tensors as they should arrive, on the CPU.
  torch::Tensor ExpectedImage(uint64_t seq) const {
    torch::Tensor t = torch::empty({rows_, cols_}, torch::kUInt8);
    for (uint64_t i = 0; i < image_bytes_; ++i) t.data_ptr<uint8_t>()[i] = ImageByte(seq, i);
    return t;
  }
  torch::Tensor ExpectedLabel(uint64_t seq) const {
    torch::Tensor t = torch::empty({rows_}, torch::kInt64);
    for (int64_t r = 0; r < rows_; ++r) t.data_ptr<int64_t>()[r] = Label(seq, r);
    return t;
  }

  uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

 private:
  static void Describe(ring::TensorDesc& d, const char* name, ring::DType dtype,
                       std::vector<int64_t> shape, uint64_t offset, uint64_t nbytes) {
    std::memset(&d, 0, sizeof(d));
    std::strncpy(d.name, name, ring::kNameBytes - 1);
    d.dtype = static_cast<uint32_t>(dtype);
    d.ndim = static_cast<uint32_t>(shape.size());
    for (size_t k = 0; k < shape.size(); ++k) d.shape[k] = shape[k];
    d.offset = offset;
    d.nbytes = nbytes;
  }

  ring::RingHeader* Header() const { return reinterpret_cast<ring::RingHeader*>(base_); }
  uint32_t* Order() const { return reinterpret_cast<uint32_t*>(base_ + ring::OrderOffset()); }

  // The test's writer fills slot seq % slots (the protocol allows any free slot).
  bool WaitFree(ring::SlotHeader* slot) const {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (slot->state.load(std::memory_order_acquire) != ring::kFree) {
      if (Clock::now() > deadline) return false;
      ring::WaitForRelease(Header(), Header()->releases.load(), std::chrono::milliseconds(10));
    }
    return true;
  }

  const uint32_t slots_;
  const int64_t rows_;
  const int64_t cols_;
  const uint64_t batches_per_epoch_;
  uint64_t image_bytes_ = 0;
  uint64_t label_offset_ = 0;
  uint64_t slot_size_ = 0;
  uint64_t bytes_ = 0;
  int fd_ = -1;
  uint8_t* base_ = nullptr;
};

bool NoGpu() {
  if (torch::cuda::is_available()) return false;
  WARN("SKIP: no CUDA device visible; the device loader's GPU checks did not run");
  return true;
}

void CheckOnDevice(const Batch& batch, const TestRing& ring, uint64_t seq) {
  REQUIRE(batch.tensors.size() == 2);
  CHECK(batch.names == std::vector<std::string>{"image", "label"});
  const torch::Tensor& image = batch.at("image");
  const torch::Tensor& label = batch.at("label");
  CHECK(image.is_cuda());
  CHECK(image.get_device() == 0);
  CHECK(label.is_cuda());
  CHECK(image.scalar_type() == torch::kUInt8);
  CHECK(label.scalar_type() == torch::kInt64);
  CHECK(image.sizes() == torch::IntArrayRef({ring.rows(), ring.cols()}));
  CHECK(batch.epoch == seq / ring.batches_per_epoch());
  CHECK(batch.index_in_epoch == seq % ring.batches_per_epoch());
  // .cpu() runs on the current stream, which Next() ordered after the copy.
  CHECK(torch::equal(image.cpu(), ring.ExpectedImage(seq)));
  CHECK(torch::equal(label.cpu(), ring.ExpectedLabel(seq)));
}

TEST_CASE("without a GPU, the device loader says so when it is made") {
  if (torch::cuda::is_available()) {
    WARN("a CUDA device is visible: the no-GPU error path is not exercised");
    return;
  }
  TestRing ring(2, 2, 8, 1);
  REQUIRE(ring.PublishEnd(0));
  try {
    DeviceLoader loader(ring.Reader(), {.device = 0});
    FAIL("a device loader was made without a GPU");
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    INFO(message);
    CHECK(message.find("ember device loader (cuda:0): no ") != std::string::npos);
  }
}

TEST_CASE("batches arrive on the device with the ring's bytes; the next copy overlaps the step") {
  if (NoGpu()) return;
  constexpr uint64_t kBatches = 4;  // one epoch; every batch fits in the ring at once
  TestRing ring(8, 64, 16384, kBatches);
  for (uint64_t seq = 0; seq < kBatches; ++seq) REQUIRE(ring.Publish(seq));
  REQUIRE(ring.PublishEnd(kBatches));

  DeviceLoader loader(ring.Reader(), {.device = 0});
  INFO("registration: " << loader.registration_status().ToString());
  // A CHECK, not a REQUIRE: if registration is refused here, the staged copies still
  // get the overlap and content checks below.
  CHECK(loader.ring_registered());
  CHECK(loader.registration_status().ok());
  const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(0).stream();
  for (uint64_t seq = 0; seq < kBatches; ++seq) {
    std::optional<Batch> batch = loader.Next();
    REQUIRE(batch.has_value());
    CHECK(batch->index_in_epoch == seq);
    // The copy of the following batch is queued before the trainer's step starts...
    CHECK(loader.copies_issued() == std::min(seq + 2, kBatches));
    if (seq + 1 < kBatches) {
      // ...and runs during it: a step that keeps the compute stream busy for a while;
      // the next batch's slot is handed back (its copy finished) before the step ends.
      at::cuda::sleep(500'000'000);  // ~0.25-0.5 s of GPU clock cycles
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (ring.Slot(seq + 1)->state.load() != ring::kFree && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      CHECK(ring.Slot(seq + 1)->state.load() == ring::kFree);
      CHECK(cudaStreamQuery(compute) == cudaErrorNotReady);
    }
    CheckOnDevice(*batch, ring, seq);
    CHECK(ring.Slot(seq)->state.load() == ring::kFree);  // its copy is done: slot is back
  }
  CHECK_FALSE(loader.Next().has_value());  // end of the epoch
  CHECK_FALSE(loader.Next().has_value());  // end of the stream
  CHECK(loader.ended());
}

TEST_CASE("a two-slot ring is reused only after each copy, registered or staged") {
  if (NoGpu()) return;
  const bool registered = GENERATE(true, false);
  INFO("register_ring = " << registered);
  constexpr uint64_t kEpochs = 3;
  constexpr uint64_t kPerEpoch = 4;
  TestRing ring(2, 256, 16384, kPerEpoch);  // 4 MiB images, rewritten as soon as freed
  bool writer_ok = true;  // read after the join
  std::thread writer([&] {
    for (uint64_t seq = 0; seq < kEpochs * kPerEpoch && writer_ok; ++seq)
      writer_ok = ring.Publish(seq);
    if (writer_ok) writer_ok = ring.PublishEnd(kEpochs * kPerEpoch);
  });
  struct Join {
    std::thread& thread;
    ~Join() {
      if (thread.joinable()) thread.join();  // also when a REQUIRE throws
    }
  } join{writer};

  std::vector<Batch> kept;  // held on the device while the ring is rewritten
  {
    DeviceLoader loader(ring.Reader(), {.device = 0, .register_ring = registered});
    INFO("registration: " << loader.registration_status().ToString());
    CHECK(loader.ring_registered() == registered);
    if (!registered) {
      CHECK(loader.registration_status().code() == StatusCode::kFailedPrecondition);
      CHECK(loader.registration_status().message().find("register_ring") != std::string::npos);
    }
    for (uint64_t epoch = 0; epoch < kEpochs; ++epoch) {
      for (uint64_t i = 0; i < kPerEpoch; ++i) {
        std::optional<Batch> batch = loader.Next();
        REQUIRE(batch.has_value());
        CHECK(batch->epoch == epoch);
        CHECK(batch->index_in_epoch == i);
        kept.push_back(std::move(*batch));
      }
      CHECK_FALSE(loader.Next().has_value());
    }
    CHECK_FALSE(loader.Next().has_value());
    CHECK(loader.ended());
  }
  writer.join();
  CHECK(writer_ok);
  for (uint64_t seq = 0; seq < kept.size(); ++seq) CheckOnDevice(kept[seq], ring, seq);
}

}  // namespace
}  // namespace ember
