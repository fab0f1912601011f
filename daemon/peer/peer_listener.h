// The TCP endpoint a daemon opens for other nodes' daemons (config key `listen`): accepts
// connections, authenticates each by mutual TLS (PeerTls) or, with `tls: off`, not at all,
// and serves a Cap'n Proto two-party RPC bootstrap capability on every authenticated one,
// after one byte that tells the client it was accepted (peer_wire.h).
//
// A peer whose handshake fails (no certificate, one from another CA, not TLS at all) or
// does not finish it within the handshake deadline is refused: its connection is closed
// and "refused peer ADDRESS: REASON" is logged (spdlog warn). Handshakes run concurrently
// and never hold up accepting others.
//
// A connection whose first byte, before TLS, is a key of PeerListenerOptions::handoffs is
// not served here: its socket goes to that handler (peer_wire.h), which does its own TLS.
//
// With serve_threads > 0 the listener accepts on its loop and hands each connection, before
// its handshake, to one of that many peer loops (peer_loops.h, round robin), which does the
// TLS handshake and serves the RPC system on it: one core no longer bounds how many nodes
// are answered at once.
#ifndef EMBER_DAEMON_PEER_PEER_LISTENER_H_
#define EMBER_DAEMON_PEER_PEER_LISTENER_H_

#include <capnp/capability.h>
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/io.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "daemon/peer/peer_loops.h"
#include "daemon/peer/peer_tls.h"
#include "ember/status.h"

namespace ember::daemon {

// An accepted, authenticated peer, for the capability served to it and for logs.
struct PeerInfo {
  std::string address;      // its end of the connection, "10.0.0.7:51234"
  std::string common_name;  // the CN of its certificate; empty with tls: off
};

// Makes the bootstrap capability served on one connection. Called on the thread of the
// loop that serves it (`loop`: the listener's own, or a peer loop's), once per authenticated
// connection; what it makes lives on that loop.
using PeerBootstrapFactory =
    std::function<capnp::Capability::Client(const PeerInfo& peer, kj::AsyncIoContext& loop)>;

// Takes over a connection's socket (its first byte read) from the peer `address`: called on
// the thread of the loop that read the byte; must not block (it hands the socket to a
// thread of its own).
using PeerHandoff = std::function<void(kj::AutoCloseFd socket, const std::string& address)>;

struct PeerListenerOptions {
  // From accepting a connection to the end of its TLS handshake (a real one takes
  // milliseconds; an idle connection holds a slot until then).
  kj::Duration handshake_timeout = 5 * kj::SECONDS;
  // TLS handshakes in flight at once (from accepting, through the wait for a peer loop, to
  // the handshake's end), in all and from one source address; a connection beyond either
  // is refused at once. So one host's idle connections cannot lock the real nodes out.
  uint32_t max_handshakes = 64;
  uint32_t max_handshakes_per_host = 8;
  // Peer loops serving the connections; 0: the listener's own loop serves them.
  unsigned serve_threads = 0;
  // By first byte: connections handed over before TLS (only with TLS: with tls: off every
  // connection is RPC).
  std::map<uint8_t, PeerHandoff> handoffs;
};

// Lives on the thread of the kj event loop it was started on; not thread-safe. Destroying
// it stops accepting and closes every connection it accepted; with serve threads, wait for
// Stop() first (what the connections call back on this loop must be able to finish).
class PeerListener final : private kj::TaskSet::ErrorHandler {
 public:
  // Binds `address` (HOST:PORT, host_port.h; port 0: any free port) and starts accepting
  // on `io`'s event loop. `tls` null means plain TCP (tls: off); otherwise it must outlive
  // the listener, as must `io`. Blocks on io.waitScope while HOST is resolved: call it
  // outside any promise callback. Errors: kInvalidArgument for a bad address, kUnavailable
  // "cannot listen for peers on ADDRESS: REASON" when it cannot be resolved or bound.
  static Result<std::unique_ptr<PeerListener>> Start(kj::AsyncIoContext& io,
                                                     const std::string& address, PeerTls* tls,
                                                     PeerBootstrapFactory factory,
                                                     PeerListenerOptions options = {});
  ~PeerListener();

  // Stops accepting and closes every connection, each on its loop; resolves on this loop
  // once they are closed. Once is enough; destroying the listener then only joins threads.
  kj::Promise<void> Stop();

  // The bound port (the one chosen when the address asked for port 0).
  uint16_t port() const { return port_; }
  // Connections authenticated and served, and connections refused, so far.
  uint64_t accepted() const { return accepted_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  struct Connection;

  PeerListener(kj::AsyncIoContext& io, PeerTls* tls, PeerBootstrapFactory factory,
               PeerListenerOptions options, kj::Own<kj::ConnectionReceiver> receiver);

  kj::Promise<void> AcceptLoop();
  void OnAccepted(kj::AuthenticatedStream raw);
  // Hands `raw` to a peer loop (its descriptor leaves this loop's event port).
  void HandOff(std::string address, kj::AuthenticatedStream raw);
  // On the loop `io` that serves the connection, as the ones below.
  kj::Promise<void> Handshake(kj::AsyncIoContext& io, std::string address,
                              kj::AuthenticatedStream raw);
  // The TLS handshake (none with tls: off), after the first byte when there are handoffs:
  // no stream when the connection was handed over.
  kj::Promise<kj::Maybe<kj::AuthenticatedStream>> Secure(const std::string& address,
                                                          kj::AuthenticatedStream raw);
  kj::Promise<void> Serve(kj::AsyncIoContext& io, const std::string& address,
                          kj::AuthenticatedStream secured);
  // Of a connection accepted, refused or handed to its RPC system; `address` as accepted.
  void EndHandshake(const std::string& address);
  void Refuse(const std::string& address, const std::string& reason);
  void taskFailed(kj::Exception&& exception) override;

  // Read-only after construction, or atomic: the peer loops use them too.
  kj::AsyncIoContext& io_;
  PeerTls* const tls_;
  const PeerBootstrapFactory factory_;
  const PeerListenerOptions options_;
  kj::Own<kj::ConnectionReceiver> receiver_;
  const uint16_t port_;
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint32_t> handshakes_{0};  // in flight
  Mutex hosts_mu_;
  std::map<std::string, uint32_t> handshakes_by_host_ GUARDED_BY(hosts_mu_);  // in flight
  std::unique_ptr<PeerLoops> loops_;      // null: serve on io_'s loop
  kj::Own<kj::TaskSet> tasks_;  // this loop's: handshakes and connections, or hand-offs
  kj::Promise<void> accepting_;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_PEER_LISTENER_H_
