#include "daemon/peer/counting_stream.h"

#include <utility>

#include "daemon/peer/forwarding_stream.h"

namespace ember::daemon {
namespace {

class CountingStream final : public ForwardingStream {
 public:
  CountingStream(kj::Own<kj::AsyncIoStream> inner, std::shared_ptr<StreamTraffic> traffic)
      : ForwardingStream(kj::mv(inner)), traffic_(std::move(traffic)) {}

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return inner().tryRead(buffer, min_bytes, max_bytes).then([this](size_t n) {
      traffic_->bytes_received += n;
      return n;
    });
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    traffic_->bytes_sent += size;
    return inner().write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    for (auto piece : pieces) traffic_->bytes_sent += piece.size();
    return inner().write(pieces);
  }

 private:
  std::shared_ptr<StreamTraffic> traffic_;
};

}  // namespace

kj::Own<kj::AsyncIoStream> CountTraffic(kj::Own<kj::AsyncIoStream> inner,
                                        std::shared_ptr<StreamTraffic> traffic) {
  return kj::heap<CountingStream>(kj::mv(inner), std::move(traffic));
}

}  // namespace ember::daemon
