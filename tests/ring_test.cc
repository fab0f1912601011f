// The ring in one process: the daemon's RingWriter writes, the SDK's ring reader reads.
// Covers the protocol (all slots held, out-of-order release, wrap-around) and the
// reader's treatment of the ring as hostile input: each header and slot field it checks
// is corrupted in turn, and the reader must answer kDataLoss naming the field, never
// read outside the mapping. Shared regions (a share group's rows in a second memfd, mapped
// twice by the reader) are written here as a hostile writer would: straight into the
// header. (Under tests/: it links both the daemon and the SDK.)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "daemon/ring/ring_writer.h"
#include "ember/ring_layout.h"
#include "sdk/src/ring_reader.h"

namespace ember {
namespace {

constexpr uint32_t kSlots = 3;
constexpr int64_t kRows = 4;
constexpr uint64_t kBatchesPerEpoch = 10;
// Two tensors per batch: "value" int64 [kRows] and "tag" uint8 [kRows], each padded to
// a cache line.
constexpr uint64_t kPayloadBytes = 2 * ring::kCacheLine;

int64_t Value(uint64_t seq, int64_t row) { return static_cast<int64_t>(seq * 1000) + row; }
uint8_t Tag(uint64_t seq, int64_t row) { return static_cast<uint8_t>(seq * 7 + row); }

void Describe(ring::TensorDesc& d, const char* name, ring::DType dtype, uint64_t offset) {
  std::memset(&d, 0, sizeof(d));
  std::strncpy(d.name, name, ring::kNameBytes - 1);
  d.dtype = static_cast<uint32_t>(dtype);
  d.ndim = 1;
  d.shape[0] = kRows;
  d.offset = offset;
  d.nbytes = kRows * ring::DTypeSize(dtype);
}

// A ring written by a RingWriter, with the test's own view of its bytes for corrupting
// them as a hostile writer would.
class TestRing {
 public:
  explicit TestRing(uint32_t slots = kSlots, uint64_t payload_bytes = kPayloadBytes) {
    auto writer = daemon::RingWriter::Create(*env_, "ring-test", slots, payload_bytes,
                                             kBatchesPerEpoch);
    REQUIRE(writer.ok());
    writer_ = std::move(writer).value();
    void* base = mmap(nullptr, writer_->size(), PROT_READ | PROT_WRITE, MAP_SHARED,
                      writer_->fd(), 0);
    REQUIRE(base != MAP_FAILED);
    base_ = static_cast<uint8_t*>(base);
  }
  ~TestRing() { munmap(base_, writer_->size()); }

  daemon::RingWriter& writer() { return *writer_; }
  ring::RingHeader& header() { return *reinterpret_cast<ring::RingHeader*>(base_); }
  ring::SlotHeader& slot(uint32_t i) {
    return *reinterpret_cast<ring::SlotHeader*>(base_ + header().slots_offset +
                                                i * header().slot_size);
  }

  // What emberd announces for this ring over RPC.
  StreamInfo Info() const {
    StreamInfo info;
    info.slot_count = writer_->slot_count();
    info.slot_size = writer_->slot_size();
    info.ring_bytes = writer_->size();
    info.batches_per_epoch = kBatchesPerEpoch;
    return info;
  }

  // `shared_fd`: the share group's memfd for the reader to take (-1: none).
  Result<std::unique_ptr<StreamReader>> Open(const StreamInfo& info, int shared_fd = -1) {
    return sdk::OpenRingReader(dup(writer_->fd()), shared_fd, info, [] { return true; },
                               nullptr);
  }
  std::unique_ptr<StreamReader> Open() {
    auto reader = Open(Info());
    REQUIRE(reader.ok());
    return std::move(reader).value();
  }

  // Fills `slot` with batch `seq` and publishes it. No Catch assertions: a writer thread
  // calls it.
  void Publish(ring::SlotHeader* slot, uint64_t seq) {
    slot->num_tensors = 2;
    slot->num_samples = kRows;
    slot->epoch = seq / kBatchesPerEpoch;
    slot->index_in_epoch = seq % kBatchesPerEpoch;
    slot->last_in_epoch = slot->index_in_epoch + 1 == kBatchesPerEpoch ? 1 : 0;
    const uint64_t payload = writer_->payload_offset();
    Describe(slot->tensors[0], "value", ring::DType::kInt64, payload);
    Describe(slot->tensors[1], "tag", ring::DType::kUInt8, payload + ring::kCacheLine);
    uint8_t* base = writer_->SlotBase(slot);
    auto* value = reinterpret_cast<int64_t*>(base + payload);
    uint8_t* tag = base + payload + ring::kCacheLine;
    for (int64_t r = 0; r < kRows; ++r) {
      value[r] = Value(seq, r);
      tag[r] = Tag(seq, r);
    }
    writer_->Publish(slot);
  }
  // Publishes batch `seq` into the lowest free slot; there must be one.
  void Publish(uint64_t seq) {
    ring::SlotHeader* slot = writer_->TryAcquire();
    REQUIRE(slot != nullptr);
    Publish(slot, seq);
  }

 private:
  std::unique_ptr<Env> env_ = NewPosixEnv();
  std::unique_ptr<daemon::RingWriter> writer_;
  uint8_t* base_ = nullptr;
};

// Checks that `batch` is batch `seq` as TestRing::Publish wrote it.
void CheckBatch(const RawBatch& batch, uint64_t seq) {
  INFO("batch " << seq);
  CHECK(batch.epoch == seq / kBatchesPerEpoch);
  CHECK(batch.index_in_epoch == seq % kBatchesPerEpoch);
  CHECK(batch.last_in_epoch == (seq % kBatchesPerEpoch + 1 == kBatchesPerEpoch));
  REQUIRE(batch.num_samples == kRows);
  REQUIRE(batch.tensors.size() == 2);
  CHECK(batch.tensors[0].name == "value");
  CHECK(batch.tensors[0].dtype == ring::DType::kInt64);
  CHECK(batch.tensors[0].shape == std::vector<int64_t>{kRows});
  CHECK(batch.tensors[1].name == "tag");
  const auto* value = static_cast<const int64_t*>(batch.tensors[0].data);
  const auto* tag = static_cast<const uint8_t*>(batch.tensors[1].data);
  for (int64_t r = 0; r < kRows; ++r) {
    CHECK(value[r] == Value(seq, r));
    CHECK(tag[r] == Tag(seq, r));
  }
}

RawBatch MustNext(StreamReader& reader, uint64_t seq) {
  auto next = reader.Next();
  REQUIRE(next.ok());
  REQUIRE(next->has_value());
  CheckBatch(**next, seq);
  return std::move(**next);
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_CASE("a ring needs at least one slot") {
  std::unique_ptr<Env> env = NewPosixEnv();
  auto writer = daemon::RingWriter::Create(*env, "ring-test", 0, kPayloadBytes, 1);
  REQUIRE_FALSE(writer.ok());
  CHECK(writer.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("the reader checks every header field and names the bad one") {
  struct Case {
    std::string field;  // what the error must name
    std::function<void(ring::RingHeader&, StreamInfo&)> corrupt;
  };
  const std::vector<Case> cases = {
      {"ring_bytes", [](ring::RingHeader&, StreamInfo& info) { info.ring_bytes += 64; }},
      {"magic", [](ring::RingHeader& h, StreamInfo&) { h.magic ^= 1; }},
      {"version", [](ring::RingHeader& h, StreamInfo&) { h.version = ring::kVersion + 1; }},
      {"total_bytes", [](ring::RingHeader& h, StreamInfo&) { h.total_bytes += 64; }},
      {"slot_count", [](ring::RingHeader& h, StreamInfo&) { h.slot_count = 0; }},
      {"slot_count", [](ring::RingHeader& h, StreamInfo&) { h.slot_count = kSlots + 1; }},
      {"slot_size", [](ring::RingHeader& h, StreamInfo&) { h.slot_size += 64; }},
      {"batches_per_epoch", [](ring::RingHeader& h, StreamInfo&) { ++h.batches_per_epoch; }},
      {"payload_offset", [](ring::RingHeader& h, StreamInfo&) { h.payload_offset = 64; }},
      {"payload_offset", [](ring::RingHeader& h, StreamInfo&) { h.payload_offset += 1; }},
      // A slot too small for its own header, announced consistently.
      {"slot_size",
       [](ring::RingHeader& h, StreamInfo& info) { info.slot_size = h.slot_size = 64; }},
      {"slot_size", [](ring::RingHeader& h, StreamInfo& info) {
         info.slot_size = h.slot_size = h.payload_offset + 65;
       }},
      {"slots_offset", [](ring::RingHeader& h, StreamInfo&) { h.slots_offset = 0; }},
      {"order_offset", [](ring::RingHeader& h, StreamInfo&) { h.order_offset = 0; }},
      {"order_offset", [](ring::RingHeader& h, StreamInfo&) { h.order_offset += 2; }},
      {"order_offset", [](ring::RingHeader& h, StreamInfo&) { h.order_offset = h.slots_offset - 8; }},
      {"slots_offset", [](ring::RingHeader& h, StreamInfo&) { h.slots_offset += 8; }},
      {"slots_offset",
       [](ring::RingHeader& h, StreamInfo&) { h.slots_offset = h.total_bytes + 64; }},
      // Slots past the end of the mapping, announced consistently: by count, by size,
      // by offset, and by a product that overflows 64 bits.
      {"slot_count", [](ring::RingHeader& h, StreamInfo& info) {
         info.slot_count = h.slot_count = 1000;
       }},
      {"slot_size", [](ring::RingHeader& h, StreamInfo& info) {
         info.slot_size = h.slot_size = h.slot_size * 2;
       }},
      {"slots_offset", [](ring::RingHeader& h, StreamInfo&) { h.slots_offset += 64; }},
      {"slot_size", [](ring::RingHeader& h, StreamInfo& info) {
         info.slot_count = h.slot_count = 4;
         info.slot_size = h.slot_size = uint64_t{1} << 62;
       }},
  };
  for (const Case& c : cases) {
    TestRing ring;
    StreamInfo info = ring.Info();
    c.corrupt(ring.header(), info);
    auto reader = ring.Open(info);
    INFO("corrupted " << c.field);
    REQUIRE_FALSE(reader.ok());
    CHECK(reader.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(reader.status().message(), c.field));
  }
}

TEST_CASE("the reader checks every slot field it uses and names the bad one") {
  struct Case {
    std::string field;
    std::function<void(ring::SlotHeader&, uint64_t slot_size)> corrupt;
  };
  const std::vector<Case> cases = {
      {"sequence", [](ring::SlotHeader& s, uint64_t) { s.sequence = 5; }},
      {"num_tensors",
       [](ring::SlotHeader& s, uint64_t) { s.num_tensors = ring::kMaxTensors + 1; }},
      {"num_samples", [](ring::SlotHeader& s, uint64_t) { s.num_samples = kRows - 1; }},
      {"tensors[1].dtype", [](ring::SlotHeader& s, uint64_t) { s.tensors[1].dtype = 99; }},
      {"tensors[0].ndim", [](ring::SlotHeader& s, uint64_t) { s.tensors[0].ndim = 0; }},
      {"tensors[0].ndim",
       [](ring::SlotHeader& s, uint64_t) { s.tensors[0].ndim = ring::kMaxDims + 1; }},
      {"tensors[0].shape[0]", [](ring::SlotHeader& s, uint64_t) { s.tensors[0].shape[0] = -1; }},
      // A shape whose byte count wraps around 64 bits to the announced nbytes.
      {"tensors[0].shape[1]", [](ring::SlotHeader& s, uint64_t) {
         s.tensors[0].ndim = 2;
         s.tensors[0].shape[1] = (int64_t{1} << 59) + 1;  // 32 * (2^59 + 1) = 2^64 + 32
       }},
      {"tensors[0].nbytes", [](ring::SlotHeader& s, uint64_t) { s.tensors[0].nbytes += 8; }},
      {"tensors[0].offset", [](ring::SlotHeader& s, uint64_t) { s.tensors[0].offset = 0; }},
      {"tensors[1].offset", [](ring::SlotHeader& s, uint64_t) { s.tensors[1].offset += 1; }},
      {"tensors[0].offset", [](ring::SlotHeader& s, uint64_t slot_size) {
         s.tensors[0].offset = slot_size + ring::kCacheLine;
       }},
      {"tensors[0].offset", [](ring::SlotHeader& s, uint64_t) {
         s.tensors[0].offset = uint64_t{0} - ring::kCacheLine;
       }},
      // Starts inside the slot, ends past it.
      {"tensors[0].nbytes", [](ring::SlotHeader& s, uint64_t slot_size) {
         s.tensors[0].offset = slot_size - ring::kCacheLine;
         s.tensors[0].ndim = 2;
         s.tensors[0].shape[1] = 4;
         s.tensors[0].nbytes = kRows * 4 * 8;
       }},
      {"state", [](ring::SlotHeader& s, uint64_t) { s.state.store(9); }},
      {"end_status", [](ring::SlotHeader& s, uint64_t) {
         s.end_status = 7;
         s.state.store(ring::kEnd);
       }},
  };
  for (const Case& c : cases) {
    TestRing ring;
    auto reader = ring.Open();
    ring.Publish(0);
    c.corrupt(ring.slot(0), ring.writer().slot_size());
    INFO("corrupted " << c.field);
    auto next = reader->Next();
    REQUIRE_FALSE(next.ok());
    CHECK(next.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(next.status().message(), "ring slot 0"));
    CHECK(Contains(next.status().message(), c.field));
    // The stream is over: the same error again, and the slot was not taken.
    auto again = reader->Next();
    REQUIRE_FALSE(again.ok());
    CHECK(again.status().message() == next.status().message());
    CHECK(reader->batches_read() == 0);
  }
}

TEST_CASE("a header changed after the reader opened it is trusted by neither side") {
  TestRing ring;
  auto reader = ring.Open();
  ring.header().slot_count = 1000;
  ring.header().slot_size = uint64_t{1} << 40;
  ring.header().slots_offset = uint64_t{1} << 40;
  for (uint64_t seq = 0; seq < 2 * kSlots; ++seq) {
    ring.Publish(seq);
    MustNext(*reader, seq);
  }
}

TEST_CASE("with every slot held the reader refuses the next batch until one comes back") {
  TestRing ring;
  auto reader = ring.Open();
  std::vector<RawBatch> held;
  for (uint64_t seq = 0; seq < kSlots; ++seq) {
    ring.Publish(seq);
    held.push_back(MustNext(*reader, seq));
  }
  CHECK(ring.writer().TryAcquire() == nullptr);
  auto refused = reader->Next();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(refused.status().message(), "all 3 ring slots are held"));
  CHECK_FALSE(reader->ended());  // not fatal: release one and go on

  held.erase(held.begin());  // batch 0's slot comes back
  ring.Publish(kSlots);
  MustNext(*reader, kSlots);
  CHECK(ring.header().consumed.load() == kSlots + 1);
}

TEST_CASE("the writer fills the lowest free slot, skipping slots the trainer still holds") {
  TestRing ring;
  auto reader = ring.Open();
  std::vector<std::optional<RawBatch>> held;
  for (uint64_t seq = 0; seq < kSlots; ++seq) {
    ring.Publish(seq);
    held.emplace_back(MustNext(*reader, seq));
  }
  // Copies share the slot: it comes back with the last of them.
  RawBatch copy = *held[1];
  held[1].reset();
  CHECK_FALSE(ring.writer().SlotFree(1));
  copy = RawBatch();
  CHECK(ring.writer().SlotFree(1));
  CHECK_FALSE(ring.writer().SlotFree(0));
  // Batch 0 is still held: batch 3 goes to slot 1, then batch 4 to slot 2.
  held[2].reset();
  for (uint64_t seq = kSlots; seq < kSlots + 2; ++seq) {
    ring::SlotHeader* slot = ring.writer().TryAcquire();
    REQUIRE(slot != nullptr);
    CHECK(ring.writer().IndexOf(slot) == seq - kSlots + 1);
    ring.Publish(slot, seq);
  }
  for (uint64_t seq = kSlots; seq < kSlots + 2; ++seq) MustNext(*reader, seq);
  CHECK(ring.header().consumed.load() == kSlots + 2);
}

TEST_CASE("a bad slot index in the order table is refused, naming it") {
  TestRing ring;
  auto reader = ring.Open();
  ring.Publish(0);
  reinterpret_cast<uint32_t*>(reinterpret_cast<uint8_t*>(&ring.header()) +
                              ring.header().order_offset)[0] = kSlots;
  auto next = reader->Next();
  REQUIRE_FALSE(next.ok());
  CHECK(next.status().code() == StatusCode::kDataLoss);
  CHECK(Contains(next.status().message(), "order[0]"));
  CHECK(Contains(next.status().message(), "slot 3"));
}

// A writer thread producing `batches` batches with Acquire (the prefetch depth applies),
// then the end marker.
std::thread Produce(TestRing& ring, uint64_t batches, std::atomic<bool>& stop) {
  return std::thread([&ring, batches, &stop] {
    for (uint64_t seq = 0; seq < batches; ++seq) {
      ring::SlotHeader* slot = ring.writer().Acquire(stop);
      if (slot == nullptr) return;
      ring.Publish(slot, seq);
    }
    ring::SlotHeader* slot = ring.writer().Acquire(stop);
    if (slot != nullptr) ring.writer().PublishEnd(slot, ring::kEndComplete, "");
  });
}

TEST_CASE("a trainer that keeps up touches only the first slots of a deep ring") {
  constexpr uint32_t kDeep = 8;
  constexpr uint64_t kBatches = 300;
  TestRing ring(kDeep, /*payload_bytes=*/64 * 1024);  // 16 pages a slot
  auto reader = ring.Open();
  std::atomic<bool> stop{false};
  std::thread writer = Produce(ring, kBatches, stop);
  // One batch at a time, each released before the next is taken, and only once the
  // writer has published it: production keeps up, the reader never waits.
  for (uint64_t seq = 0; seq < kBatches; ++seq) {
    while (ring.writer().published() <= seq) std::this_thread::sleep_for(std::chrono::microseconds(50));
    MustNext(*reader, seq);
    if (seq % kBatchesPerEpoch == kBatchesPerEpoch - 1) REQUIRE(reader->Next().ok());  // epoch over
  }
  REQUIRE(reader->Next().ok());  // the end marker
  writer.join();
  CHECK(ring.writer().depth() == daemon::RingWriter::kInitialDepth);
  CHECK(ring.writer().slots_touched() <= daemon::RingWriter::kInitialDepth);
  // Slots never written were never touched: their pages are not resident.
  const uint64_t first_untouched =
      ring.header().slots_offset + uint64_t{ring.writer().slots_touched()} * ring.writer().slot_size();
  std::vector<unsigned char> resident((ring.writer().size() - first_untouched + 4095) / 4096);
  void* mapping = mmap(nullptr, ring.writer().size(), PROT_READ, MAP_SHARED, ring.writer().fd(), 0);
  REQUIRE(mapping != MAP_FAILED);
  const uint64_t page_start = (first_untouched + 4095) / 4096 * 4096;
  REQUIRE(mincore(static_cast<uint8_t*>(mapping) + page_start, ring.writer().size() - page_start,
                  resident.data()) == 0);
  size_t pages = 0;
  for (size_t i = 0; i < (ring.writer().size() - page_start) / 4096; ++i) pages += resident[i] & 1;
  CHECK(pages == 0);
  munmap(mapping, ring.writer().size());
}

TEST_CASE("the depth grows when the trainer holds batches and waits for more") {
  constexpr uint32_t kDeep = 8;
  constexpr uint64_t kKeep = 6;
  TestRing ring(kDeep);
  auto reader = ring.Open();
  std::atomic<bool> stop{false};
  std::thread writer = Produce(ring, kKeep + 1, stop);
  // Holding kKeep batches at once needs kKeep slots out of the free ones (plus one for
  // the writer to fill): the writer must go past its initial depth of 3, never past 8.
  std::vector<RawBatch> held;
  for (uint64_t seq = 0; seq < kKeep; ++seq) held.push_back(MustNext(*reader, seq));
  held.clear();
  MustNext(*reader, kKeep);
  REQUIRE(reader->Next().ok());
  writer.join();
  CHECK(ring.writer().depth() >= kKeep);
  CHECK(ring.writer().depth() <= kDeep);
}

TEST_CASE("the depth grows when the trainer waits although the writer was held back") {
  constexpr uint32_t kDeep = 8;
  constexpr uint64_t kBatches = 40;
  TestRing ring(kDeep);
  auto reader = ring.Open();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t seq = 0; seq < kBatches; ++seq) {
      ring::SlotHeader* slot = ring.writer().Acquire(stop);
      if (slot == nullptr) return;
      // Every 8th batch takes 25 ms, longer than the 3 ready batches last the trainer:
      // bursty production (it keeps up on average) that a deeper ring hides.
      if (seq % 8 == 7) std::this_thread::sleep_for(std::chrono::milliseconds(25));
      ring.Publish(slot, seq);
    }
  });
  for (uint64_t seq = 0; seq < kBatches; ++seq) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    MustNext(*reader, seq);
    if (seq % kBatchesPerEpoch == kBatchesPerEpoch - 1) REQUIRE(reader->Next().ok());  // epoch over
  }
  writer.join();
  CHECK(ring.writer().depth() > daemon::RingWriter::kInitialDepth);
}

TEST_CASE("many more batches than slots wrap around the ring intact, with both sides racing") {
  constexpr uint64_t kBatches = 2000;
  TestRing ring;
  auto reader = ring.Open();
  std::atomic<bool> stop{false};
  std::thread writer = Produce(ring, kBatches, stop);
  // Keep the previous batch alive while taking the next, so the writer runs one slot
  // behind the release and the reader sometimes waits.
  std::optional<RawBatch> previous;
  uint64_t seq = 0, epochs = 0;
  while (true) {
    auto next = reader->Next();
    REQUIRE(next.ok());
    if (!next->has_value()) {
      if (reader->ended()) break;
      ++epochs;
      continue;
    }
    CheckBatch(**next, seq++);
    previous = std::move(**next);
  }
  stop = true;
  ring.writer().Wake();
  writer.join();
  CHECK(seq == kBatches);
  CHECK(epochs == kBatches / kBatchesPerEpoch);
  CHECK(reader->batches_read() == kBatches);
  CHECK(ring.writer().published() == kBatches);
  CHECK(ring.writer().consumed() == kBatches);
}

const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

// The byte at `at` of SharedRows' memfd.
uint8_t SharedByte(uint64_t at) { return static_cast<uint8_t>(at * 13 + at / 4096); }

// A share group's memory as emberd makes it: a memfd of `pages` pages (SharedByte each),
// sealed against writes, so that it can only be mapped read-only. Closed on destruction.
class SharedRows {
 public:
  explicit SharedRows(uint64_t pages) : bytes_(pages * kPage) {
    fd_ = memfd_create("ring-test-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(fd_ >= 0);
    std::vector<uint8_t> data(bytes_);
    for (uint64_t i = 0; i < bytes_; ++i) data[i] = SharedByte(i);
    REQUIRE(pwrite(fd_, data.data(), bytes_, 0) == static_cast<ssize_t>(bytes_));
    REQUIRE(fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) == 0);
  }
  ~SharedRows() { close(fd_); }
  int Dup() const { return dup(fd_); }  // for the reader to own
  uint64_t bytes() const { return bytes_; }

 private:
  const uint64_t bytes_;
  int fd_ = -1;
};

// Makes tensor 0 of `slot` (kRows rows of `cols` uint8 each) lie in shared region
// `region` - 1 at `offset`.
void DescribeShared(ring::SlotHeader& slot, uint32_t region, uint64_t offset, int64_t cols) {
  ring::TensorDesc& d = slot.tensors[0];
  std::memset(&d, 0, sizeof(d));
  std::strncpy(d.name, "rows", ring::kNameBytes - 1);
  d.dtype = static_cast<uint32_t>(ring::DType::kUInt8);
  d.ndim = 2;
  d.shape[0] = kRows;
  d.shape[1] = cols;
  d.offset = offset;
  d.nbytes = static_cast<uint64_t>(kRows * cols);
  d.region = region;
}

// Descriptors open in this process.
size_t OpenFds() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

// Whether [at, at + n) is mapped in this process.
bool Mapped(const void* at, size_t n) {
  std::vector<unsigned char> pages((n + kPage - 1) / kPage + 1);
  const auto start = reinterpret_cast<uintptr_t>(at) / kPage * kPage;
  return mincore(reinterpret_cast<void*>(start), reinterpret_cast<uintptr_t>(at) + n - start,
                 pages.data()) == 0;
}

TEST_CASE("a tensor in a shared region that wraps past its end reads as one run") {
  // Two regions of the memfd's 5 pages: [1, 3) and [3, 5); the tensor lies in the second,
  // from a row 3/4 page before its end, so it wraps over to the region's start.
  SharedRows rows(5);
  const int64_t cols = static_cast<int64_t>(kPage / 2);  // kRows rows: 2 pages
  const uint64_t region_offset = 3 * kPage, region_bytes = 2 * kPage;
  const uint64_t offset = region_bytes - 3 * kPage / 4;
  const void* data = nullptr;
  {
    TestRing ring;
    ring.header().shared_count = 2;
    ring.header().shared[0] = {kPage, 2 * kPage};
    ring.header().shared[1] = {region_offset, region_bytes};
    const size_t fds = OpenFds();
    auto reader = ring.Open(ring.Info(), rows.Dup());
    REQUIRE(reader.ok());
    CHECK(OpenFds() == fds);  // both descriptors closed once mapped
    ring.Publish(0);
    DescribeShared(ring.slot(0), 2, offset, cols);
    auto next = (*reader)->Next();
    REQUIRE(next.ok());
    REQUIRE(next->has_value());
    const RawTensor& tensor = (**next).tensors[0];
    CHECK(tensor.name == "rows");
    CHECK(tensor.shape == std::vector<int64_t>{kRows, cols});
    REQUIRE(tensor.nbytes == 2 * kPage);
    const auto* bytes = static_cast<const uint8_t*>(tensor.data);
    const auto* ring_base = static_cast<const uint8_t*>((*reader)->ring_base());
    CHECK((bytes + tensor.nbytes <= ring_base || bytes >= ring_base + (*reader)->ring_size()));
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < tensor.nbytes; ++i)
      wrong += bytes[i] != SharedByte(region_offset + (offset + i) % region_bytes);
    CHECK(wrong == 0);
    // The slot's own tensor is as before.
    const auto* tag = static_cast<const uint8_t*>((**next).tensors[1].data);
    for (int64_t r = 0; r < kRows; ++r) CHECK(tag[r] == Tag(0, r));
    data = bytes;
    CHECK(Mapped(data, tensor.nbytes));
  }
  // The reader and its batch are gone: so are the region's mappings.
  CHECK_FALSE(Mapped(data, 1));
}

TEST_CASE("the reader checks the shared regions and names the bad field") {
  struct Case {
    std::string field;
    std::function<void(ring::RingHeader&)> corrupt;
    bool with_fd = true;
  };
  const std::vector<Case> cases = {
      {"shared_count", [](ring::RingHeader& h) { h.shared_count = ring::kMaxTensors + 1; }},
      // Regions but no memory to map them from.
      {"shared_count", [](ring::RingHeader&) {}, /*with_fd=*/false},
      {"shared[0].offset", [](ring::RingHeader& h) { h.shared[0].offset = 100; }},
      {"shared[0].offset", [](ring::RingHeader& h) { h.shared[0].offset = 4 * kPage; }},
      {"shared[0].offset", [](ring::RingHeader& h) { h.shared[0].offset = uint64_t{0} - kPage; }},
      {"shared[0].bytes", [](ring::RingHeader& h) { h.shared[0].bytes = 0; }},
      {"shared[0].bytes", [](ring::RingHeader& h) { h.shared[0].bytes = kPage + 64; }},
      {"shared[1].bytes", [](ring::RingHeader& h) { h.shared[1].bytes = 3 * kPage; }},
      {"shared[1].bytes", [](ring::RingHeader& h) { h.shared[1].bytes = uint64_t{0} - kPage; }},
  };
  for (const Case& c : cases) {
    SharedRows rows(4);
    TestRing ring;
    ring.header().shared_count = 2;
    ring.header().shared[0] = {0, kPage};
    ring.header().shared[1] = {2 * kPage, 2 * kPage};
    c.corrupt(ring.header());
    const size_t fds = OpenFds();
    auto reader = ring.Open(ring.Info(), c.with_fd ? rows.Dup() : -1);
    INFO("corrupted " << c.field);
    REQUIRE_FALSE(reader.ok());
    CHECK(OpenFds() == fds);  // closed on error too
    CHECK(reader.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(reader.status().message(), "ring header: " + c.field));
  }
}

TEST_CASE("the reader checks where a tensor lies in a shared region and names the field") {
  struct Case {
    std::string field;
    std::function<void(ring::SlotHeader&, uint64_t region_bytes)> corrupt;
    uint32_t shared_count = 1;
  };
  const std::vector<Case> cases = {
      {"tensors[0].region", [](ring::SlotHeader& s, uint64_t) { s.tensors[0].region = 2; }},
      {"tensors[1].region", [](ring::SlotHeader& s, uint64_t) { s.tensors[1].region = 1; },
       /*shared_count=*/0},
      {"tensors[0].region",
       [](ring::SlotHeader& s, uint64_t) { s.tensors[0].region = uint32_t{0} - 1; }},
      {"tensors[0].offset", [](ring::SlotHeader& s, uint64_t bytes) {
         DescribeShared(s, 1, bytes, 8);
       }},
      {"tensors[0].offset", [](ring::SlotHeader& s, uint64_t) {
         DescribeShared(s, 1, uint64_t{0} - 8, 8);
       }},
      // Starts inside the region, ends past its second mapping.
      {"tensors[0].nbytes", [](ring::SlotHeader& s, uint64_t bytes) {
         DescribeShared(s, 1, bytes / 2, static_cast<int64_t>(bytes / 2));
       }},
  };
  for (const Case& c : cases) {
    SharedRows rows(2);
    TestRing ring;
    ring.header().shared_count = c.shared_count;
    ring.header().shared[0] = {0, rows.bytes()};
    auto reader = ring.Open(ring.Info(), c.shared_count > 0 ? rows.Dup() : -1);
    REQUIRE(reader.ok());
    ring.Publish(0);
    c.corrupt(ring.slot(0), rows.bytes());
    INFO("corrupted " << c.field);
    auto next = (*reader)->Next();
    REQUIRE_FALSE(next.ok());
    CHECK(next.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(next.status().message(), "ring slot 0 (batch 0): " + c.field));
    CHECK((*reader)->batches_read() == 0);
  }
}

TEST_CASE("a share group's memory that the ring does not use is closed, not mapped") {
  SharedRows rows(1);
  TestRing ring;
  const size_t fds = OpenFds();
  auto reader = ring.Open(ring.Info(), rows.Dup());
  REQUIRE(reader.ok());
  CHECK(OpenFds() == fds);
  ring.Publish(0);
  MustNext(**reader, 0);
}

TEST_CASE("the end marker's status reaches the reader") {
  for (ring::EndStatus status : {ring::kEndCancelled, ring::kEndError}) {
    TestRing ring;
    auto reader = ring.Open();
    ring.Publish(0);
    MustNext(*reader, 0);
    ring.writer().PublishEnd(ring.writer().TryAcquire(), status, "disk on fire");
    auto next = reader->Next();
    REQUIRE_FALSE(next.ok());
    CHECK(next.status().code() ==
          (status == ring::kEndCancelled ? StatusCode::kCancelled : StatusCode::kDataLoss));
    CHECK(Contains(next.status().message(), "disk on fire"));
    CHECK(reader->ended());
  }
}

}  // namespace
}  // namespace ember
