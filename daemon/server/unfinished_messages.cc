#include "daemon/server/unfinished_messages.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/rpc_status.h"

namespace ember::daemon {

Status UnfinishedMessages::Begin(uid_t uid, bool exempt, uint64_t bytes) {
  const uint64_t mine = of(uid);
  if (!exempt && mine + bytes > limits_.per_uid_bytes)
    return ResourceExhausted("uid " + std::to_string(uid) + ": a message of " +
                             std::to_string(bytes) + " bytes on top of " + std::to_string(mine) +
                             " in " + limits_.noun + " is over the limit of " +
                             std::to_string(limits_.per_uid_bytes) + " per user");
  if (total_ + bytes > limits_.total_bytes)
    return ResourceExhausted("uid " + std::to_string(uid) + ": a message of " +
                             std::to_string(bytes) + " bytes would take the daemon's " +
                             limits_.noun + " over their limit of " +
                             std::to_string(limits_.total_bytes) + " bytes");
  total_ += bytes;
  by_uid_[uid] += bytes;
  return Status::Ok();
}

void UnfinishedMessages::End(uid_t uid, uint64_t bytes) {
  total_ -= std::min(total_, bytes);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) by_uid_.erase(it);
}

uint64_t UnfinishedMessages::of(uid_t uid) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? 0 : it->second;
}

namespace {

// Cap'n Proto's stream framing (capnp/serialize.h): a little-endian word count per
// segment after the segment count minus one, padded to 8 bytes, then the segments.
constexpr uint32_t kMaxSegments = 512;  // as capnp's reader refuses more

class BoundedStream final : public kj::AsyncCapabilityStream {
 public:
  BoundedStream(kj::Own<kj::AsyncCapabilityStream> inner, UnfinishedMessages& incoming,
                UnfinishedMessages& outgoing, uid_t uid, bool exempt, kj::Timer& timer)
      : inner_(kj::mv(inner)),
        budget_(incoming),
        outgoing_(outgoing),
        uid_(uid),
        exempt_(exempt),
        timer_(timer) {}
  ~BoundedStream() noexcept(false) {
    if (counted_ != 0) budget_.End(uid_, counted_);
    if (unsent_ != 0) outgoing_.End(uid_, unsent_);
  }

  kj::Promise<size_t> tryRead(void* buffer, size_t minBytes, size_t maxBytes) override {
    return Gated([this, buffer, minBytes, maxBytes] {
      return Bounded(inner_->tryRead(buffer, minBytes, maxBytes)).then([this, buffer](size_t n) {
        Observe(static_cast<const kj::byte*>(buffer), n);
        return n;
      });
    });
  }
  kj::Promise<ReadResult> tryReadWithFds(void* buffer, size_t minBytes, size_t maxBytes,
                                         kj::AutoCloseFd* fdBuffer, size_t maxFds) override {
    return Gated([this, buffer, minBytes, maxBytes, fdBuffer, maxFds] {
      return Bounded(inner_->tryReadWithFds(buffer, minBytes, maxBytes, fdBuffer, maxFds))
          .then([this, buffer](ReadResult r) {
            Observe(static_cast<const kj::byte*>(buffer), r.byteCount);
            return r;
          });
    });
  }
  kj::Promise<ReadResult> tryReadWithStreams(void* buffer, size_t minBytes, size_t maxBytes,
                                             kj::Own<kj::AsyncCapabilityStream>* streamBuffer,
                                             size_t maxStreams) override {
    return Gated([this, buffer, minBytes, maxBytes, streamBuffer, maxStreams] {
      return Bounded(inner_->tryReadWithStreams(buffer, minBytes, maxBytes, streamBuffer,
                                                maxStreams))
          .then([this, buffer](ReadResult r) {
            Observe(static_cast<const kj::byte*>(buffer), r.byteCount);
            return r;
          });
    });
  }

  kj::Promise<void> write(const void* buffer, size_t size) override {
    return Sending(size, [&] { return inner_->write(buffer, size); });
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return Sending(SizeOf(pieces), [&] { return inner_->write(pieces); });
  }
  kj::Promise<void> writeWithFds(kj::ArrayPtr<const kj::byte> data,
                                 kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> moreData,
                                 kj::ArrayPtr<const int> fds) override {
    return Sending(data.size() + SizeOf(moreData),
                   [&] { return inner_->writeWithFds(data, moreData, fds); });
  }
  kj::Promise<void> writeWithStreams(kj::ArrayPtr<const kj::byte> data,
                                     kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> moreData,
                                     kj::Array<kj::Own<kj::AsyncCapabilityStream>> streams) override {
    return Sending(data.size() + SizeOf(moreData), [&] {
      return inner_->writeWithStreams(data, moreData, kj::mv(streams));
    });
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }
  void getsockopt(int level, int option, void* value, uint* length) override {
    inner_->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, uint length) override {
    inner_->setsockopt(level, option, value, length);
  }
  void getsockname(struct sockaddr* addr, uint* length) override {
    inner_->getsockname(addr, length);
  }
  void getpeername(struct sockaddr* addr, uint* length) override {
    inner_->getpeername(addr, length);
  }
  kj::Maybe<int> getFd() const override { return inner_->getFd(); }

 private:
  static uint64_t SizeOf(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) {
    uint64_t bytes = 0;
    for (const auto& piece : pieces) bytes += piece.size();
    return bytes;
  }

  // A write of `bytes` (`start` begins it) counted in the outgoing budget until the
  // client has taken it, within the deadline; past the budget or the deadline the
  // connection is closed. Runs only while the RPC system, which owns the write's promise,
  // lives, and it is destroyed before this stream.
  template <typename Start>
  kj::Promise<void> Sending(uint64_t bytes, Start&& start) {
    Status begun = outgoing_.Begin(uid_, exempt_, bytes);
    if (!begun.ok()) return Refuse(begun);
    unsent_ += bytes;
    const kj::Duration deadline = outgoing_.limits().deadline;
    return start()
        .exclusiveJoin(timer_.afterDelay(deadline).then([this, bytes, deadline] {
          return Refuse(DeadlineExceeded("uid " + std::to_string(uid_) + ": a reply of " +
                                         std::to_string(bytes) + " bytes was not read within " +
                                         std::to_string(deadline / kj::MILLISECONDS) + " ms"));
        }))
        .then([this, bytes] { Sent(bytes); },
              [this, bytes](kj::Exception&& e) {
                Sent(bytes);
                kj::throwRecoverableException(kj::mv(e));
              });
  }
  void Sent(uint64_t bytes) {
    outgoing_.End(uid_, bytes);
    unsent_ -= std::min(unsent_, bytes);
    if (unsent_ != 0) return;
    for (auto& reader : waiting_readers_) reader->fulfill();
    waiting_readers_.clear();
  }

  // A read that would begin a message waits until every reply is sent (see the file
  // comment); one within a message goes on, racing the message's deadline.
  template <typename Read>
  auto Gated(Read&& read) -> decltype(read()) {
    if (unsent_ == 0 || body_left_ != 0 || !header_.empty()) return read();
    auto drained = kj::newPromiseAndFulfiller<void>();
    waiting_readers_.push_back(kj::mv(drained.fulfiller));
    return drained.promise.then(kj::fwd<Read>(read));
  }

  // A read within a message races the message's deadline.
  template <typename T>
  kj::Promise<T> Bounded(kj::Promise<T> read) {
    if (counted_ == 0) return read;
    return read.exclusiveJoin(timer_.atTime(deadline_).then([this]() -> kj::Promise<T> {
      return Refuse<T>(DeadlineExceeded(
          "uid " + std::to_string(uid_) + ": a message of " + std::to_string(counted_) +
          " bytes did not arrive within " +
          std::to_string(budget_.limits().deadline / kj::MILLISECONDS) + " ms of its header"));
    }));
  }

  template <typename T = void>
  kj::Promise<T> Refuse(const Status& why) {
    Close(why);
    return kj::Promise<T>(rpc_status::ToException(why));
  }

  // Logs `why` and shuts the socket down both ways: the client sees its end at once and
  // the RPC connection over it ends (its next read is an end of stream), so that the
  // message's memory goes with it.
  void Close(const Status& why) {
    spdlog::warn("closing a client connection: {}", why.ToString());
    KJ_IF_MAYBE(fd, inner_->getFd()) { ::shutdown(*fd, SHUT_RDWR); }
  }

  // Follows the framing through `n` bytes just read; throws (closing the connection) when
  // a header announces more than the budget allows.
  void Observe(const kj::byte* data, size_t n) {
    while (n > 0) {
      if (body_left_ > 0) {
        const size_t take = std::min<uint64_t>(n, body_left_);
        body_left_ -= take;
        data += take;
        n -= take;
        if (body_left_ == 0) Finished();
        continue;
      }
      // The header: 8 bytes first (segment count, first size), then the rest it names.
      const size_t want = HeaderBytes() - header_.size();
      const size_t take = std::min(n, want);
      header_.insert(header_.end(), data, data + take);
      data += take;
      n -= take;
      if (header_.size() == HeaderBytes()) StartBody();
    }
  }

  static uint32_t Le32(const kj::byte* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  }
  // Bytes of the header as far as known: 8 until the segment count is in.
  size_t HeaderBytes() const {
    if (header_.size() < 8) return 8;
    const uint64_t segments = uint64_t{Le32(header_.data())} + 1;
    if (segments > kMaxSegments) return header_.size();  // capnp refuses it; stop here
    return (4 + 4 * segments + 7) / 8 * 8;
  }
  void StartBody() {
    const uint64_t segments = uint64_t{Le32(header_.data())} + 1;
    uint64_t words = 0;
    if (segments <= kMaxSegments)
      for (uint64_t i = 0; i < segments; ++i) words += Le32(header_.data() + 4 + 4 * i);
    header_.clear();
    body_left_ = words * 8;
    if (body_left_ == 0) return;
    Status begun = budget_.Begin(uid_, exempt_, body_left_);
    if (!begun.ok()) {
      body_left_ = 0;
      Close(begun);
      kj::throwFatalException(rpc_status::ToException(begun));
    }
    counted_ = body_left_;
    deadline_ = timer_.now() + budget_.limits().deadline;
  }
  void Finished() {
    budget_.End(uid_, counted_);
    counted_ = 0;
  }

  kj::Own<kj::AsyncCapabilityStream> inner_;
  UnfinishedMessages& budget_;    // incoming
  UnfinishedMessages& outgoing_;  // replies being written
  const uid_t uid_;
  const bool exempt_;
  kj::Timer& timer_;
  std::vector<kj::byte> header_;  // of the message being read, until complete
  uint64_t body_left_ = 0;        // of the message being read
  uint64_t counted_ = 0;          // its body's bytes, counted in budget_ until it ends
  kj::TimePoint deadline_ = kj::origin<kj::TimePoint>();
  uint64_t unsent_ = 0;  // bytes of writes begun and not yet taken by the client
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> waiting_readers_;  // until unsent_ is 0
};

}  // namespace

kj::Own<kj::AsyncCapabilityStream> NewBoundedStream(kj::Own<kj::AsyncCapabilityStream> inner,
                                                    UnfinishedMessages& incoming,
                                                    UnfinishedMessages& outgoing, uid_t uid,
                                                    bool exempt, kj::Timer& timer) {
  return kj::heap<BoundedStream>(kj::mv(inner), incoming, outgoing, uid, exempt, timer);
}

}  // namespace ember::daemon
