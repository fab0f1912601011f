#include "daemon/peer/counting_stream.h"

#include <utility>

namespace ember::daemon {
namespace {

class CountingStream final : public kj::AsyncIoStream {
 public:
  CountingStream(kj::Own<kj::AsyncIoStream> inner, std::shared_ptr<StreamTraffic> traffic)
      : inner_(kj::mv(inner)), traffic_(std::move(traffic)) {}

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return inner_->tryRead(buffer, min_bytes, max_bytes).then([this](size_t n) {
      traffic_->bytes_received += n;
      return n;
    });
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    traffic_->bytes_sent += size;
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    for (auto piece : pieces) traffic_->bytes_sent += piece.size();
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

 private:
  kj::Own<kj::AsyncIoStream> inner_;
  std::shared_ptr<StreamTraffic> traffic_;
};

}  // namespace

kj::Own<kj::AsyncIoStream> CountTraffic(kj::Own<kj::AsyncIoStream> inner,
                                        std::shared_ptr<StreamTraffic> traffic) {
  return kj::heap<CountingStream>(kj::mv(inner), std::move(traffic));
}

}  // namespace ember::daemon
