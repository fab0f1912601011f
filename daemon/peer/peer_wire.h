// The one byte a PeerListener writes on each connection it accepts, after the TLS
// handshake (at once with tls: off) and before Cap'n Proto starts; ConnectToPeer reads it
// before sending anything. With TLS 1.3 the client's side of the handshake ends before the
// server has checked the client's certificate: waiting for this byte makes a refusal show
// at the client as the server's TLS alert ("unknown ca"), never as a write that failed.
#ifndef EMBER_DAEMON_PEER_PEER_WIRE_H_
#define EMBER_DAEMON_PEER_PEER_WIRE_H_

#include <cstdint>

namespace ember::daemon {

inline constexpr uint8_t kPeerAcceptedByte = 0xE1;

// A connection to a PeerListener whose first byte, before any TLS, is this one is a decode
// rows stream (daemon/rpc/decode_rows.h): the listener hands its socket over
// (PeerListenerOptions::handoffs), and the stream's server does the TLS handshake itself
// (OpenSSL directly: daemon/peer/tls_socket.h), then writes kPeerAcceptedByte as the
// listener does. Any other first byte starts a TLS handshake (a TLS record's first byte is
// 0x16) for Cap'n Proto RPC.
inline constexpr uint8_t kPeerDecodeRowsKind = 0x44;

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_PEER_WIRE_H_
