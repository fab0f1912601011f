#include "daemon/peer/peer_connector.h"

#include <kj/compat/tls.h>

#include <utility>

#include "daemon/peer/host_port.h"
#include "daemon/peer/peer_wire.h"
#include "daemon/peer/read_buffer.h"

namespace ember::daemon {

namespace {

using ConnectResult = Result<std::unique_ptr<PeerConnection>>;

// Where a connection attempt is, for its errors.
enum class Step { kResolve, kConnect, kHandshake, kAccept };

const char* StepName(Step step) {
  switch (step) {
    case Step::kResolve:
      return "resolving the host";
    case Step::kConnect:
      return "the TCP connect";
    case Step::kHandshake:
      return "the TLS handshake";
    case Step::kAccept:
      return "waiting for the server to accept this node";
  }
  return "?";
}

// A failure in the TLS layer (ours or an alert from the server) rather than in the network.
bool IsTlsFailure(const kj::Exception& e) {
  const kj::StringPtr description = e.getDescription();
  return description.startsWith("OpenSSL error") || description.startsWith("TLS peer");
}

ConnectResult Failed(const std::string& address, Step step, const kj::Exception& e) {
  const std::string prefix = "peer " + address + ": ";
  const std::string reason = DescribeTlsError(e);
  switch (step) {
    case Step::kResolve:
      return Unavailable(prefix + "cannot resolve the host: " + reason);
    case Step::kConnect:
      return Unavailable(prefix + "TCP connect failed: " + reason);
    case Step::kHandshake:
      if (!IsTlsFailure(e)) return Unavailable(prefix + "TLS handshake failed: " + reason);
      return FailedPrecondition(prefix + "TLS handshake failed: " + reason +
                                " (the server's certificate must come from this node's CA "
                                "and name the host in a subjectAltName DNS entry)");
    case Step::kAccept:
      if (!IsTlsFailure(e)) {
        return Unavailable(prefix + "the server did not accept this node: " + reason);
      }
      return FailedPrecondition(prefix + "the server refused this node: " + reason +
                                " (this node's certificate must come from the server's CA)");
  }
  return Unavailable(prefix + reason);
}

}  // namespace

PeerConnection::PeerConnection(std::string address, kj::Own<kj::AsyncIoStream> stream)
    : address_(std::move(address)),
      stream_(kj::mv(stream)),
      client_(*stream_),
      bootstrap_(client_.bootstrap()) {}

namespace {

// Reads the listener's kPeerAcceptedByte from `stream` and hands the stream on; fails
// (for Failed) when the connection ends first or something else answers.
kj::Promise<kj::Own<kj::AsyncIoStream>> AwaitAccepted(kj::Own<kj::AsyncIoStream> stream) {
  auto byte = kj::heap<uint8_t>(0);
  uint8_t* first = byte.get();
  auto read = stream->tryRead(first, 1, 1);
  return read.then([stream = kj::mv(stream), byte = kj::mv(byte)](size_t n) mutable {
    if (n == 0) {
      kj::throwFatalException(
          KJ_EXCEPTION(DISCONNECTED, "it closed the connection without a word"));
    }
    if (*byte != kPeerAcceptedByte) {
      kj::throwFatalException(kj::Exception(
          kj::Exception::Type::FAILED, __FILE__, __LINE__,
          kj::str("its first byte is ", static_cast<unsigned>(*byte), ", not ",
                  static_cast<unsigned>(kPeerAcceptedByte), ": not an emberd peer endpoint?")));
    }
    return kj::mv(stream);
  });
}

}  // namespace

kj::Promise<ConnectResult> ConnectToPeer(kj::AsyncIoProvider& io, PeerTls* tls,
                                         const std::string& address,
                                         PeerConnectOptions options) {
  Result<HostPort> host_port = ParseHostPort(address);
  if (!host_port.ok()) return ConnectResult(host_port.status());
  const std::string server_name =
      options.server_name.empty() ? host_port->host : options.server_name;

  struct Attempt {
    Step step = Step::kResolve;
    kj::Own<kj::NetworkAddress> target;
  };
  auto attempt = kj::heap<Attempt>();
  Attempt* state = attempt.get();
  kj::Promise<ConnectResult> connected =
      io.getNetwork()
          .parseAddress(kj::StringPtr(host_port->ToString().c_str()))
          .then([state](kj::Own<kj::NetworkAddress> target) {
            state->step = Step::kConnect;
            state->target = kj::mv(target);
            return state->target->connect();
          })
          .then([state, tls, server_name](kj::Own<kj::AsyncIoStream> stream) {
            if (tls == nullptr) return kj::Promise<kj::Own<kj::AsyncIoStream>>(kj::mv(stream));
            state->step = Step::kHandshake;
            return tls->context().wrapClient(BufferReads(kj::mv(stream)), server_name);
          })
          .then([state](kj::Own<kj::AsyncIoStream> stream) {
            state->step = Step::kAccept;
            return AwaitAccepted(kj::mv(stream));
          })
          .then([address, traffic = options.traffic](
                    kj::Own<kj::AsyncIoStream> stream) -> ConnectResult {
            if (traffic != nullptr) stream = CountTraffic(kj::mv(stream), traffic);
            return std::make_unique<PeerConnection>(address, BufferReads(kj::mv(stream)));
          })
          .catch_([state, address](kj::Exception&& e) -> ConnectResult {
            return Failed(address, state->step, e);
          });
  const uint64_t timeout_ms = options.timeout / kj::MILLISECONDS;
  auto deadline = io.getTimer().afterDelay(options.timeout).then(
      [state, address, timeout_ms]() -> ConnectResult {
        return DeadlineExceeded("peer " + address + ": no answer within " +
                                std::to_string(timeout_ms) + " ms (at " +
                                StepName(state->step) + ")");
      });
  return connected.exclusiveJoin(kj::mv(deadline)).attach(kj::mv(attempt));
}

}  // namespace ember::daemon
