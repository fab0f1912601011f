// ForwardingStream: a kj::AsyncIoStream that passes every call to another one; a base for
// streams that change only some calls (counting, buffering).
// Thread-safety: the event loop's thread only, as the stream it wraps.
#ifndef EMBER_DAEMON_PEER_FORWARDING_STREAM_H_
#define EMBER_DAEMON_PEER_FORWARDING_STREAM_H_

#include <kj/async-io.h>

namespace ember::daemon {

class ForwardingStream : public kj::AsyncIoStream {
 public:
  explicit ForwardingStream(kj::Own<kj::AsyncIoStream> inner) : inner_(kj::mv(inner)) {}

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return inner_->tryRead(buffer, min_bytes, max_bytes);
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }
  void getsockopt(int level, int option, void* value, kj::uint* length) override {
    inner_->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, kj::uint length) override {
    inner_->setsockopt(level, option, value, length);
  }
  void getsockname(struct sockaddr* addr, kj::uint* length) override {
    inner_->getsockname(addr, length);
  }
  void getpeername(struct sockaddr* addr, kj::uint* length) override {
    inner_->getpeername(addr, length);
  }

 protected:
  kj::AsyncIoStream& inner() { return *inner_; }

 private:
  kj::Own<kj::AsyncIoStream> inner_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_FORWARDING_STREAM_H_
