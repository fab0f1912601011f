// The ring in one process: the daemon's RingWriter writes, the SDK's ring reader reads.
// Covers the protocol (all slots held, out-of-order release, wrap-around) and the
// reader's treatment of the ring as hostile input: each header and slot field it checks
// is corrupted in turn, and the reader must answer kDataLoss naming the field, never
// read outside the mapping. (Under tests/: it links both the daemon and the SDK.)
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
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
  TestRing() {
    auto writer = daemon::RingWriter::Create(*env_, "ring-test", kSlots, kPayloadBytes,
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

  Result<std::unique_ptr<StreamReader>> Open(const StreamInfo& info) {
    return sdk::OpenRingReader(dup(writer_->fd()), info, [] { return true; }, nullptr);
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
  // Publishes batch `seq` into the next slot, which must be free.
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

TEST_CASE("slots released out of order come back to the writer in sequence") {
  TestRing ring;
  auto reader = ring.Open();
  std::vector<std::optional<RawBatch>> held;
  for (uint64_t seq = 0; seq < kSlots; ++seq) {
    ring.Publish(seq);
    held.emplace_back(MustNext(*reader, seq));
  }
  // Copies share the slot: it comes back with the last of them.
  RawBatch copy = *held[1];
  held[2].reset();
  held[1].reset();
  CHECK(ring.writer().SlotFree(2));
  CHECK_FALSE(ring.writer().SlotFree(1));
  copy = RawBatch();
  CHECK(ring.writer().SlotFree(1));
  // The writer fills slots in sequence: batch 3 goes to slot 0, still held.
  CHECK_FALSE(ring.writer().SlotFree(0));
  CHECK(ring.writer().TryAcquire() == nullptr);
  held[0].reset();
  for (uint64_t seq = kSlots; seq < 2 * kSlots; ++seq) {
    ring::SlotHeader* slot = ring.writer().TryAcquire();
    REQUIRE(slot != nullptr);
    CHECK(ring.writer().IndexOf(slot) == seq % kSlots);
    ring.Publish(slot, seq);
  }
  for (uint64_t seq = kSlots; seq < 2 * kSlots; ++seq) MustNext(*reader, seq);
}

TEST_CASE("many more batches than slots wrap around the ring intact, with both sides racing") {
  constexpr uint64_t kBatches = 2000;
  TestRing ring;
  auto reader = ring.Open();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t seq = 0; seq < kBatches; ++seq) {
      ring::SlotHeader* slot = ring.writer().Acquire(stop);
      if (slot == nullptr) return;
      ring.Publish(slot, seq);
    }
    ring::SlotHeader* slot = ring.writer().Acquire(stop);
    if (slot != nullptr) ring.writer().PublishEnd(slot, ring::kEndComplete, "");
  });
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
