#include "tests/support/ring_reader_testing.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>

#include "daemon/stream/stream_testing.h"
#include "sdk/src/ring_reader.h"

namespace ember::daemon {

std::unique_ptr<StreamReader> ReaderOf(const Stream& stream) {
  StreamInfo info;
  info.slot_count = stream.slot_count();
  info.slot_size = stream.slot_size();
  info.ring_bytes = stream.ring_bytes();
  info.batches_per_epoch = stream.batches_per_epoch();
  const int shared_fd = stream.shared_fd() >= 0 ? dup(stream.shared_fd()) : -1;
  auto reader =
      sdk::OpenRingReader(dup(stream.ring_fd()), shared_fd, info, [] { return true; }, nullptr);
  REQUIRE(reader.ok());
  return std::move(reader).value();
}

std::vector<uint64_t> CheckPatternRows(const RawBatch& b, uint64_t seed) {
  constexpr uint64_t kRowBytes = PatternSource::kRowBytes;
  REQUIRE(b.tensors.size() == 3);
  const auto* image = static_cast<const uint8_t*>(b.tensors[0].data);
  const auto* label = static_cast<const int64_t*>(b.tensors[1].data);
  const auto* ids = static_cast<const int64_t*>(b.tensors[2].data);
  std::vector<uint8_t> want(kRowBytes);
  std::vector<uint64_t> seen;
  for (uint32_t r = 0; r < b.num_samples; ++r) {
    PatternSource::Expected(static_cast<uint64_t>(ids[r]), seed, b.epoch, want.data());
    CHECK(std::memcmp(image + r * kRowBytes, want.data(), kRowBytes) == 0);
    CHECK(label[r] == ids[r]);
    seen.push_back(static_cast<uint64_t>(ids[r]));
  }
  return seen;
}

std::map<uint64_t, std::multiset<uint64_t>> ReadPatternRows(
    StreamReader& reader, uint64_t seed, const std::function<void(int)>& after_batch) {
  std::map<uint64_t, std::multiset<uint64_t>> epochs;
  int batches = 0;
  while (!reader.ended()) {
    auto next = reader.Next();
    REQUIRE(next.ok());
    if (!next->has_value()) continue;
    for (uint64_t id : CheckPatternRows(**next, seed)) epochs[(*next)->epoch].insert(id);
    if (after_batch) after_batch(++batches);
  }
  return epochs;
}

std::multiset<uint64_t> AllIds(uint64_t count) {
  std::multiset<uint64_t> all;
  for (uint64_t i = 0; i < count; ++i) all.insert(i);
  return all;
}

}  // namespace ember::daemon
