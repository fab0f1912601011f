#include "daemon/peer/peer_listener.h"

#include <fcntl.h>

#include <kj/compat/tls.h>
#include <kj/debug.h>
#include <kj/io.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "daemon/peer/tcp_listen.h"
#include "daemon/peer/peer_wire.h"
#include "daemon/peer/read_buffer.h"

namespace ember::daemon {

namespace {

// The host of an accepted connection's "HOST:PORT" (an IPv6 one in brackets).
std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

// After accept() itself fails (out of descriptors), the wait before accepting again.
constexpr kj::Duration kAcceptRetryDelay = 1 * kj::SECONDS;

}  // namespace

// One authenticated connection and the RPC system serving the bootstrap capability on it.
struct PeerListener::Connection {
  Connection(kj::Own<kj::AsyncIoStream> s, capnp::Capability::Client bootstrap)
      : stream(kj::mv(s)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER),
        rpc(capnp::makeRpcServer(network, kj::mv(bootstrap))) {}
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
};

Result<std::unique_ptr<PeerListener>> PeerListener::Start(kj::AsyncIoContext& io,
                                                          const std::string& address,
                                                          PeerTls* tls,
                                                          PeerBootstrapFactory factory,
                                                          PeerListenerOptions options) {
  EMBER_ASSIGN_OR_RETURN(kj::Own<kj::ConnectionReceiver> receiver,
                         ListenTcp(io, address, "peers"));
  return std::unique_ptr<PeerListener>(
      new PeerListener(io, tls, std::move(factory), options, kj::mv(receiver)));
}

PeerListener::PeerListener(kj::AsyncIoContext& io, PeerTls* tls, PeerBootstrapFactory factory,
                           PeerListenerOptions options, kj::Own<kj::ConnectionReceiver> receiver)
    : io_(io),
      tls_(tls),
      factory_(std::move(factory)),
      options_(options),
      receiver_(kj::mv(receiver)),
      port_(static_cast<uint16_t>(receiver_->getPort())),
      loops_(options.serve_threads == 0 ? nullptr
                                        : std::make_unique<PeerLoops>(options.serve_threads)),
      tasks_(kj::heap<kj::TaskSet>(static_cast<kj::TaskSet::ErrorHandler&>(*this))),
      accepting_(AcceptLoop().eagerlyEvaluate(nullptr)) {}

PeerListener::~PeerListener() {
  accepting_ = nullptr;
  tasks_ = nullptr;
  loops_.reset();  // each loop's connections go on its thread
}

kj::Promise<void> PeerListener::Stop() {
  accepting_ = nullptr;
  // This loop's connections, or its hand-offs.
  tasks_ = kj::heap<kj::TaskSet>(static_cast<kj::TaskSet::ErrorHandler&>(*this));
  if (loops_ == nullptr) return kj::READY_NOW;
  return loops_->Clear();
}

kj::Promise<void> PeerListener::AcceptLoop() {
  // evalNow: accepting may throw at once (EMFILE), not only fail its promise.
  return kj::evalNow([this] { return receiver_->acceptAuthenticated(); })
      .then([this](kj::AuthenticatedStream&& raw) -> kj::Promise<void> {
        OnAccepted(kj::mv(raw));
        return kj::READY_NOW;
      }, [this](kj::Exception&& e) -> kj::Promise<void> {
        spdlog::error("accepting peers on port {} failed, retrying in 1 s: {}", port_,
                      e.getDescription().cStr());
        return io_.provider->getTimer().afterDelay(kAcceptRetryDelay);
      })
      .then([this] { return AcceptLoop(); });
}

void PeerListener::OnAccepted(kj::AuthenticatedStream raw) {
  std::string address = raw.peerIdentity->toString().cStr();
  // With tls: off there is no handshake to bound.
  if (tls_ != nullptr) {
    if (handshakes_.load() >= options_.max_handshakes) {
      Refuse(address, std::to_string(handshakes_.load()) + " handshakes are in flight already");
      return;
    }
    const std::string host = HostOf(address);
    uint32_t from_host = 0;
    {
      MutexLock lock(&hosts_mu_);
      uint32_t& count = handshakes_by_host_[host];
      from_host = count;
      if (count < options_.max_handshakes_per_host) ++count;
    }
    if (from_host >= options_.max_handshakes_per_host) {
      Refuse(address, std::to_string(from_host) + " handshakes from " + host +
                          " are in flight already");
      return;
    }
    ++handshakes_;
  }
  if (loops_ == nullptr) {
    tasks_->add(Handshake(io_, std::move(address), kj::mv(raw)));
    return;
  }
  HandOff(std::move(address), kj::mv(raw));
}

void PeerListener::HandOff(std::string address, kj::AuthenticatedStream raw) {
  int moved = -1;
  std::string why = "the stream has no descriptor";
  KJ_IF_MAYBE(fd, raw.stream->getFd()) {
    moved = fcntl(*fd, F_DUPFD_CLOEXEC, 0);
    if (moved < 0) why = std::strerror(errno);
  }
  if (moved < 0) {
    EndHandshake(address);
    Refuse(address, "cannot hand the connection to a peer loop: " + why);
    return;
  }
  // The stream's end takes the socket out of this loop's event port; the duplicate stays.
  raw.stream = nullptr;
  kj::AutoCloseFd socket(moved);
  tasks_->add(loops_->Run([this, address = std::move(address),
                          socket = kj::mv(socket)](PeerLoops::Loop& loop) mutable {
    constexpr uint kFlags = kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP |
                            kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC |
                            kj::LowLevelAsyncIoProvider::ALREADY_NONBLOCK;
    kj::AuthenticatedStream here{loop.io.lowLevelProvider->wrapSocketFd(socket.release(), kFlags),
                                 kj::UnknownPeerIdentity::newInstance()};
    loop.tasks->add(Handshake(loop.io, std::move(address), kj::mv(here)));
  }));
}

kj::Promise<void> PeerListener::Handshake(kj::AsyncIoContext& io, std::string address,
                                          kj::AuthenticatedStream raw) {
  kj::Promise<kj::Maybe<kj::AuthenticatedStream>> secured = Secure(address, kj::mv(raw));
  const uint64_t timeout_ms = options_.handshake_timeout / kj::MILLISECONDS;
  auto deadline = io.provider->getTimer().afterDelay(options_.handshake_timeout)
                      .then([timeout_ms]() -> kj::Promise<kj::Maybe<kj::AuthenticatedStream>> {
                        return KJ_EXCEPTION(DISCONNECTED,
                                            kj::str("no TLS handshake within ", timeout_ms,
                                                    " ms"));
                      });
  return secured.exclusiveJoin(kj::mv(deadline))
      .then(
          [this, &io, address](kj::Maybe<kj::AuthenticatedStream>&& stream) -> kj::Promise<void> {
            EndHandshake(address);
            KJ_IF_MAYBE(s, stream) { return Serve(io, address, kj::mv(*s)); }
            return kj::READY_NOW;  // handed over
          },
          [this, address](kj::Exception&& e) {
            EndHandshake(address);
            Refuse(address, DescribeTlsError(e));
          });
}

kj::Promise<kj::Maybe<kj::AuthenticatedStream>> PeerListener::Secure(
    const std::string& address, kj::AuthenticatedStream raw) {
  using Secured = kj::Maybe<kj::AuthenticatedStream>;
  auto wrap = [this](kj::AuthenticatedStream raw) {
    return tls_->context().wrapServer(kj::mv(raw)).then([](kj::AuthenticatedStream&& s) {
      return Secured(kj::mv(s));
    });
  };
  if (tls_ == nullptr) return Secured(kj::mv(raw));
  // TLS reads a record's header, then its body: buffered, one read of the socket.
  if (options_.handoffs.empty()) {
    raw.stream = BufferReads(kj::mv(raw.stream));
    return wrap(kj::mv(raw));
  }
  // One byte exactly, so that a handed-over socket keeps everything after it.
  auto first = kj::heapArray<kj::byte>(1);
  kj::byte* at = first.begin();
  kj::AsyncIoStream& stream = *raw.stream;
  return stream.tryRead(at, 1, 1).then(
      [this, address, wrap, raw = kj::mv(raw), first = kj::mv(first)](
          size_t n) mutable -> kj::Promise<Secured> {
        if (n == 0) return KJ_EXCEPTION(DISCONNECTED, "it closed the connection without a word");
        auto handoff = options_.handoffs.find(first[0]);
        if (handoff == options_.handoffs.end()) {
          raw.stream = BufferReads(kj::mv(raw.stream), 16 * 1024, first.asPtr());
          return wrap(kj::mv(raw));
        }
        int moved = -1;
        KJ_IF_MAYBE(fd, raw.stream->getFd()) { moved = fcntl(*fd, F_DUPFD_CLOEXEC, 0); }
        if (moved < 0)
          return KJ_EXCEPTION(FAILED, kj::str("cannot hand the connection over: ",
                                              std::strerror(errno)));
        // The stream's end takes the socket out of this loop's event port; the duplicate
        // goes to the handler.
        raw.stream = nullptr;
        handoff->second(kj::AutoCloseFd(moved), address);
        return Secured(nullptr);
      });
}

kj::Promise<void> PeerListener::Serve(kj::AsyncIoContext& io, const std::string& address,
                                      kj::AuthenticatedStream secured) {
  PeerInfo peer{address, ""};
  if (tls_ != nullptr) {
    auto& identity = kj::downcast<kj::TlsPeerIdentity>(*secured.peerIdentity);
    if (!identity.hasCertificate()) {
      Refuse(address, "it presented no certificate");
      return kj::READY_NOW;
    }
    peer.common_name = identity.getCommonName().cStr();
  }
  ++accepted_;
  spdlog::info("peer {} connected ({})", address,
               tls_ == nullptr ? std::string("tls: off")
                               : "certificate CN '" + peer.common_name + "'");
  static constexpr uint8_t kAccepted = kPeerAcceptedByte;
  kj::AsyncIoStream& stream = *secured.stream;
  return stream.write(&kAccepted, 1)
      .then([this, &io, address, peer, stream = kj::mv(secured.stream)]() mutable {
        // The RPC system reads a message's first word, then its body: buffered.
        auto connection = kj::heap<Connection>(BufferReads(kj::mv(stream)), factory_(peer, io));
        auto disconnected = connection->network.onDisconnect();
        return disconnected.attach(kj::mv(connection)).then([address] {
          spdlog::info("peer {} disconnected", address);
        });
      });
}

void PeerListener::EndHandshake(const std::string& address) {
  if (tls_ == nullptr) return;
  --handshakes_;
  MutexLock lock(&hosts_mu_);
  auto it = handshakes_by_host_.find(HostOf(address));
  if (it != handshakes_by_host_.end() && --it->second == 0) handshakes_by_host_.erase(it);
}

void PeerListener::Refuse(const std::string& address, const std::string& reason) {
  ++refused_;
  spdlog::warn("refused peer {}: {}", address, reason);
}

void PeerListener::taskFailed(kj::Exception&& exception) {
  spdlog::warn("peer connection ended: {}", exception.getDescription().cStr());
}

}  // namespace ember::daemon
