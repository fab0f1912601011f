#include "daemon/peer/read_buffer.h"

#include <catch2/catch.hpp>

#include <string>

#include "daemon/peer/forwarding_stream.h"

namespace ember::daemon {
namespace {

// Counts the reads that reach the stream under the buffer.
class ReadCounter final : public ForwardingStream {
 public:
  ReadCounter(kj::Own<kj::AsyncIoStream> inner, int* reads)
      : ForwardingStream(kj::mv(inner)), reads_(reads) {}
  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    ++*reads_;
    return ForwardingStream::tryRead(buffer, min_bytes, max_bytes);
  }

 private:
  int* reads_;
};

std::string Read(kj::AsyncIoStream& s, size_t min, size_t max, kj::WaitScope& ws) {
  std::string out(max, '\0');
  out.resize(s.tryRead(&out[0], min, max).wait(ws));
  return out;
}

TEST_CASE("BufferReads serves small reads from one read of what has arrived") {
  auto io = kj::setupAsyncIo();
  auto& ws = io.waitScope;
  auto pipe = io.provider->newTwoWayPipe();
  int reads = 0;
  auto buffered = BufferReads(kj::heap<ReadCounter>(kj::mv(pipe.ends[0]), &reads), 64);
  pipe.ends[1]->write("headbody-onehe2_body-two", 24).wait(ws);
  CHECK(Read(*buffered, 4, 4, ws) == "head");
  CHECK(Read(*buffered, 8, 8, ws) == "body-one");
  CHECK(Read(*buffered, 4, 4, ws) == "he2_");
  CHECK(Read(*buffered, 2, 100, ws) == "body-two");  // what is buffered, up to max
  CHECK(reads == 1);

  // A read larger than the buffer goes straight through, after what is buffered.
  const std::string big(200, 'x');
  pipe.ends[1]->write("ab", 2).wait(ws);
  CHECK(Read(*buffered, 1, 1, ws) == "a");
  pipe.ends[1]->write(big.data(), big.size()).wait(ws);
  CHECK(Read(*buffered, 201, 201, ws) == "b" + big);

  // Writes pass through; the end of the stream ends reads short.
  buffered->write("out", 3).wait(ws);
  CHECK(Read(*pipe.ends[1], 3, 3, ws) == "out");
  pipe.ends[1]->write("tail", 4).wait(ws);
  pipe.ends[1]->shutdownWrite();
  CHECK(Read(*buffered, 10, 10, ws) == "tail");
  CHECK(Read(*buffered, 1, 1, ws).empty());
}

TEST_CASE("BufferReads returns the bytes read before it first") {
  auto io = kj::setupAsyncIo();
  auto& ws = io.waitScope;
  auto pipe = io.provider->newTwoWayPipe();
  const kj::byte first[] = {0x16};
  auto buffered = BufferReads(kj::mv(pipe.ends[0]), 64, first);
  pipe.ends[1]->write("rest", 4).wait(ws);
  CHECK(Read(*buffered, 5, 5, ws) == "\x16rest");
}

}  // namespace
}  // namespace ember::daemon
