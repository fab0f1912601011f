// The decode rows stream: remote decode workers' transport. A trainer node's stream asks a
// worker daemon (config decode_workers) to decode samples and reads the rows it sends
// back straight into the ring slot.
//
// Wire: the caller opens a TCP connection to the worker's peer endpoint and sends
// kPeerDecodeRowsKind (daemon/peer/peer_wire.h) before TLS; the listener hands the socket
// to DecodeRowsServer, which does mutual TLS with OpenSSL directly (TlsSocket) and writes
// kPeerAcceptedByte. Then, one at a time: the caller writes a frame holding a DecodeRequest
// message, the worker a frame holding a DecodeAnswer and, when it decoded, rowBytes bytes of
// rows, tensor-major (schemas/peer.capnp). A frame is a little-endian uint32 byte count and
// a flat Cap'n Proto message of that many bytes.
//
// Why not Peer RPC over kj's TLS: a batch's rows are megabytes. An RPC answer is a message
// the receiver reads whole and then copies out, and kj's TLS moves bytes 8 KiB at a time
// through the event loop (~0.25 ms of a core per 224x224 RGB row, as much as decoding a
// small JPEG). Here the worker encrypts from its decode buffer and the trainer node
// decrypts into the slot, each on threads of their own.
#ifndef EMBER_DAEMON_RPC_DECODE_ROWS_H_
#define EMBER_DAEMON_RPC_DECODE_ROWS_H_

#include <capnp/common.h>
#include <kj/array.h>
#include <kj/io.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "daemon/decode/decode_channel.h"
#include "daemon/decode/decode_request.h"
#include "daemon/peer/peer_tls.h"
#include "daemon/peer/tls_socket.h"
#include "daemon/service/peer_service.h"
#include "ember/status.h"

namespace ember::daemon {

struct DecodeRowsOptions {
  // Worker: how long a stream may wait for its next request before it is closed.
  std::chrono::milliseconds idle_timeout{300000};
  // Both: the TLS handshake (the caller's: with the TCP connect and the acceptance).
  std::chrono::milliseconds handshake_timeout{5000};
  // Worker: how long a request may take to decode before its stream is closed (the lender
  // has its own deadline for loading the dataset).
  std::chrono::milliseconds answer_timeout{120000};
  // Worker: streams served at once (a trainer node opens one per call in flight); more
  // are refused.
  size_t max_streams = 64;
  // Caller: open streams kept between calls.
  size_t max_idle_streams = 8;
};

// The worker's side: serves the decode rows streams the peer listener hands over
// (PeerListenerOptions::handoffs), each on a thread of its own, with service.Decode for the
// node the caller's certificate names. `service` and `tls` must outlive it.
class DecodeRowsServer {
 public:
  DecodeRowsServer(const PeerService& service, PeerTls& tls, DecodeRowsOptions options = {});
  ~DecodeRowsServer();  // Stop()

  // Serves `socket` (its first byte read) of the peer at `address`; past max_streams, or
  // once stopped, it is closed at once (logged). Any thread; never blocks.
  void Serve(kj::AutoCloseFd socket, const std::string& address);
  // Ends every stream (their calls fail at the caller) and joins their threads. Idempotent.
  void Stop();
  // Streams being served now.
  size_t streams() const;

 private:
  struct Served {
    int fd = -1;  // the socket, for Stop()'s shutdown(2); the thread closes it last
    std::thread thread;
    bool done = false;
  };
  // Serves stream `id` on socket `fd` (closed at its end).
  void Run(uint64_t id, int fd, std::string address);
  // Joins the threads of streams that have ended.
  void Reap() REQUIRES(mu_);

  const PeerService& service_;
  PeerTls& tls_;
  const DecodeRowsOptions options_;
  mutable Mutex mu_;
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t next_id_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Served> served_ GUARDED_BY(mu_);
};

// The caller's side: a DecodeChannel to the worker daemon at `address` (HOST:PORT, its peer
// endpoint), over streams it opens as needed and keeps open between calls. `tls` must
// outlive it. Cancel() ends transfers at once; a connect in progress within 100 ms; a TLS
// handshake in progress by its deadline.
class DecodeRowsChannel final : public DecodeChannel {
 public:
  DecodeRowsChannel(PeerTls& tls, std::string address, DecodeRowsOptions options = {});
  ~DecodeRowsChannel() override;

  // Errors name the worker: a refusal with its code (the stream is kept); a lost, broken or
  // late stream kUnavailable / kDeadlineExceeded (dropped; the next call opens another).
  Result<RemoteAnswer> Decode(const DecodeRequest& request, const RowsDestination& into,
                              std::chrono::steady_clock::time_point deadline) override;
  void Cancel() override;

  // Streams open and idle now.
  size_t idle_streams() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Idle {
    std::unique_ptr<TlsSocket> socket;
    Clock::time_point since;
  };
  // A new stream: TCP connect, the kind byte, TLS, the worker's acceptance.
  Result<std::unique_ptr<TlsSocket>> Open(Clock::time_point deadline);
  // How far a call got on its stream.
  enum class Progress {
    kNothing,   // no answer read (on a kept stream: the worker may have closed it meanwhile)
    kAnswered,  // its answer's frame read, the stream broken after it
    kInStep,    // answered in full: the stream can serve the next call
  };
  // One request on `socket`.
  Result<RemoteAnswer> Exchange(TlsSocket& socket, const kj::Array<capnp::word>& request,
                                const RowsDestination& into, uint64_t rows,
                                Clock::time_point deadline, Progress& progress);
  std::unique_ptr<TlsSocket> TakeIdle();
  void Keep(std::unique_ptr<TlsSocket> socket);

  PeerTls& tls_;
  const std::string address_;
  const DecodeRowsOptions options_;
  mutable Mutex mu_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  std::vector<Idle> idle_ GUARDED_BY(mu_);
  std::vector<TlsSocket*> busy_ GUARDED_BY(mu_);
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_RPC_DECODE_ROWS_H_
