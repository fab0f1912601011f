// Connecting to another node's daemon (its PeerListener): TCP, then mutual TLS, then Cap'n
// Proto two-party RPC, all under one deadline.
//
// Which server certificate is accepted: one from the CA of this node's PeerTls (the must:
// both ends authenticate by the common CA) that names the expected server name, HOST of
// the address unless PeerConnectOptions::server_name says otherwise, in a subjectAltName
// DNS entry (or in its CN when it has no DNS entry). kj 0.9.2 checks that name with
// OpenSSL's host-name match (X509_check_host), which does not look at IP entries: to be
// reached as 10.0.0.5:7000 a node's certificate needs DNS:10.0.0.5 (add IP:10.0.0.5 too,
// for other TLS tools). docs/service.md ("Several nodes") shows the openssl commands.
#ifndef EMBER_DAEMON_PEER_PEER_CONNECTOR_H_
#define EMBER_DAEMON_PEER_PEER_CONNECTOR_H_

#include <capnp/capability.h>
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <memory>
#include <string>

#include "daemon/peer/counting_stream.h"
#include "daemon/peer/peer_tls.h"
#include "ember/status.h"

namespace ember::daemon {

struct PeerConnectOptions {
  // For the TCP connect, the TLS handshake and the server's acceptance together.
  kj::Duration timeout = 10 * kj::SECONDS;
  // The name the server's certificate must carry; empty: the address's HOST.
  std::string server_name;
  // Non-null: the connection's RPC bytes are added to it (counting_stream.h).
  std::shared_ptr<StreamTraffic> traffic;
};

// An open connection to another daemon. Capabilities taken from it work while it lives;
// destroying it closes the connection. Used on the event loop's thread only.
class PeerConnection {
 public:
  PeerConnection(std::string address, kj::Own<kj::AsyncIoStream> stream);

  const std::string& address() const { return address_; }
  // The server's bootstrap capability (for a daemon: rpc::Peer, schemas/peer.capnp).
  capnp::Capability::Client bootstrap() { return bootstrap_; }
  template <typename T>
  typename T::Client Bootstrap() {
    return bootstrap_.castAs<T>();
  }
  // Resolves when the connection ends (the peer went away, or a broken protocol).
  kj::Promise<void> OnDisconnect() { return client_.onDisconnect(); }

 private:
  const std::string address_;
  kj::Own<kj::AsyncIoStream> stream_;
  capnp::TwoPartyClient client_;
  capnp::Capability::Client bootstrap_;
};

// Connects to `address` (HOST:PORT, host_port.h) and resolves once the server has
// accepted this node (peer_wire.h), which is when a server that refuses this node's
// certificate shows it. `tls` null means plain TCP (tls: off); otherwise it must outlive
// the returned connection, as `io` must. Never fails the promise; the Result's errors
// name the address and what failed:
//   kInvalidArgument      a bad address
//   kUnavailable          HOST not resolved, TCP connect refused, the connection dropped
//                         (or closed by the server without a TLS alert)
//   kFailedPrecondition   a TLS failure: the server's certificate not from this node's CA
//                         or not naming HOST ("certificate verify failed"), or the server
//                         refusing this node's certificate (a TLS alert); or a server
//                         that is not an emberd peer endpoint
//   kDeadlineExceeded     no answer within options.timeout, naming the step it was at
kj::Promise<Result<std::unique_ptr<PeerConnection>>> ConnectToPeer(
    kj::AsyncIoProvider& io, PeerTls* tls, const std::string& address,
    PeerConnectOptions options = {});

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_PEER_CONNECTOR_H_
