#include "daemon/peer/read_buffer.h"

#include <algorithm>
#include <cstring>

#include "daemon/peer/forwarding_stream.h"

namespace ember::daemon {
namespace {

class ReadBuffer final : public ForwardingStream {
 public:
  ReadBuffer(kj::Own<kj::AsyncIoStream> inner, size_t capacity,
             kj::ArrayPtr<const kj::byte> already_read)
      : ForwardingStream(kj::mv(inner)),
        buffer_(kj::heapArray<kj::byte>(std::max(capacity, already_read.size()))),
        end_(already_read.size()) {
    if (end_ != 0) std::memcpy(buffer_.begin(), already_read.begin(), end_);
  }

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return ReadMore(static_cast<kj::byte*>(buffer), min_bytes, max_bytes, 0);
  }

 private:
  // Reads into out[done, max) from the buffer, then from the inner stream, until at least `min`
  // bytes are there (fewer only at the end of the stream).
  kj::Promise<size_t> ReadMore(kj::byte* out, size_t min, size_t max, size_t done) {
    const size_t buffered = std::min(end_ - begin_, max - done);
    std::memcpy(out + done, buffer_.begin() + begin_, buffered);
    begin_ += buffered;
    done += buffered;
    if (done >= min) return done;
    if (max - done >= buffer_.size())  // a large read: straight into the caller's buffer
      return inner().tryRead(out + done, min - done, max - done).then([done](size_t n) {
        return done + n;
      });
    return inner().tryRead(buffer_.begin(), min - done, buffer_.size())
        .then([this, out, min, max, done](size_t n) -> kj::Promise<size_t> {
          begin_ = 0;
          end_ = n;
          if (n == 0) return done;  // the end of the stream
          return ReadMore(out, min, max, done);
        });
  }

  kj::Array<kj::byte> buffer_;
  size_t begin_ = 0;  // buffer_[begin_, end_) is read from inner_, not yet by the caller
  size_t end_ = 0;
};

}  // namespace

kj::Own<kj::AsyncIoStream> BufferReads(kj::Own<kj::AsyncIoStream> inner, size_t capacity,
                                       kj::ArrayPtr<const kj::byte> already_read) {
  return kj::heap<ReadBuffer>(kj::mv(inner), capacity, already_read);
}

}  // namespace ember::daemon
