#include "tests/support/ring_reader_testing.h"

#include <unistd.h>

#include <catch2/catch.hpp>

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

}  // namespace ember::daemon
