#include "daemon/peer/peer_listener.h"

#include <kj/compat/tls.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "daemon/peer/tcp_listen.h"
#include "daemon/peer/peer_wire.h"
#include "daemon/peer/read_buffer.h"

namespace ember::daemon {

namespace {

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
  return std::unique_ptr<PeerListener>(new PeerListener(io.provider->getTimer(), tls,
                                                        std::move(factory), options,
                                                        kj::mv(receiver)));
}

PeerListener::PeerListener(kj::Timer& timer, PeerTls* tls, PeerBootstrapFactory factory,
                           PeerListenerOptions options, kj::Own<kj::ConnectionReceiver> receiver)
    : timer_(timer),
      tls_(tls),
      factory_(std::move(factory)),
      options_(options),
      receiver_(kj::mv(receiver)),
      port_(static_cast<uint16_t>(receiver_->getPort())),
      tasks_(*this),
      accepting_(AcceptLoop().eagerlyEvaluate(nullptr)) {}

PeerListener::~PeerListener() = default;

kj::Promise<void> PeerListener::AcceptLoop() {
  // evalNow: accepting may throw at once (EMFILE), not only fail its promise.
  return kj::evalNow([this] { return receiver_->acceptAuthenticated(); })
      .then([this](kj::AuthenticatedStream&& raw) -> kj::Promise<void> {
        OnAccepted(kj::mv(raw));
        return kj::READY_NOW;
      }, [this](kj::Exception&& e) -> kj::Promise<void> {
        spdlog::error("accepting peers on port {} failed, retrying in 1 s: {}", port_,
                      e.getDescription().cStr());
        return timer_.afterDelay(kAcceptRetryDelay);
      })
      .then([this] { return AcceptLoop(); });
}

void PeerListener::OnAccepted(kj::AuthenticatedStream raw) {
  std::string address = raw.peerIdentity->toString().cStr();
  if (handshakes_ >= options_.max_handshakes) {
    Refuse(address, std::to_string(handshakes_) + " handshakes are in flight already");
    return;
  }
  tasks_.add(Handshake(std::move(address), kj::mv(raw)));
}

kj::Promise<void> PeerListener::Handshake(std::string address, kj::AuthenticatedStream raw) {
  ++handshakes_;
  // TLS reads a record's header, then its body: buffered, one read of the socket.
  if (tls_ != nullptr) raw.stream = BufferReads(kj::mv(raw.stream));
  kj::Promise<kj::AuthenticatedStream> secured =
      tls_ == nullptr ? kj::Promise<kj::AuthenticatedStream>(kj::mv(raw))
                      : tls_->context().wrapServer(kj::mv(raw));
  const uint64_t timeout_ms = options_.handshake_timeout / kj::MILLISECONDS;
  auto deadline = timer_.afterDelay(options_.handshake_timeout)
                      .then([timeout_ms]() -> kj::Promise<kj::AuthenticatedStream> {
                        return KJ_EXCEPTION(DISCONNECTED,
                                            kj::str("no TLS handshake within ", timeout_ms,
                                                    " ms"));
                      });
  return secured.exclusiveJoin(kj::mv(deadline))
      .then(
          [this, address](kj::AuthenticatedStream&& stream) {
            --handshakes_;
            return Serve(address, kj::mv(stream));
          },
          [this, address](kj::Exception&& e) {
            --handshakes_;
            Refuse(address, DescribeTlsError(e));
          });
}

kj::Promise<void> PeerListener::Serve(const std::string& address,
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
      .then([this, address, peer, stream = kj::mv(secured.stream)]() mutable {
        // The RPC system reads a message's first word, then its body: buffered.
        auto connection = kj::heap<Connection>(BufferReads(kj::mv(stream)), factory_(peer));
        auto disconnected = connection->network.onDisconnect();
        return disconnected.attach(kj::mv(connection)).then([address] {
          spdlog::info("peer {} disconnected", address);
        });
      });
}

void PeerListener::Refuse(const std::string& address, const std::string& reason) {
  ++refused_;
  spdlog::warn("refused peer {}: {}", address, reason);
}

void PeerListener::taskFailed(kj::Exception&& exception) {
  spdlog::warn("peer connection ended: {}", exception.getDescription().cStr());
}

}  // namespace ember::daemon
