// TlsSocket: mutual TLS over a connected TCP socket with OpenSSL directly, for bulk bytes
// between daemons (the decode rows stream). Records go between the socket and the caller's
// buffers with no event loop and no staging buffer beyond OpenSSL's; every call has a
// deadline; Cancel() from any thread ends a blocked call at once. One thread at a time per
// socket (Cancel excepted).
//
// The rules are PeerTls's (peer_tls.h) and the same as kj's connections (peer_listener.h,
// peer_connector.h): both ends present a certificate from the one CA; the client also
// checks that the server's certificate names the server name it expects.
//
// Errors name what failed (the handshake, a read or a write, with its progress) and
// OpenSSL's reason without its "error:0A000086:SSL routines::" decoration, or errno's text:
//   kDeadlineExceeded    not done by the deadline ("TLS read not done within 200 ms (0 of
//                        100 bytes read)", "TLS handshake not done within 5000 ms")
//   kUnavailable         the connection reset or closed where it must not end ("the
//                        connection ended after X of Y bytes"), or a broken record
//   kFailedPrecondition  the handshake failed: a certificate refused ("certificate verify
//                        failed: hostname mismatch (...)"), the other end not speaking TLS
//                        ("http request", "wrong version number"); or the peer sent a TLS
//                        alert: it refused this node's certificate ("tlsv1 alert unknown
//                        ca"; with TLS 1.3 a client learns that at its first Read, not in
//                        Connect)
//   kCancelled           after Cancel()
// After any error the connection is of no further use: destroy it. (After
// kDeadlineExceeded a Write may have sent part of its bytes and a Read taken part of
// them, as their messages say: the stream is out of step.)
//
// Writes go out with send(MSG_NOSIGNAL): a peer that went away fails a Write with
// kUnavailable and never raises SIGPIPE, whatever the process does with that signal.
#ifndef EMBER_DAEMON_PEER_TLS_SOCKET_H_
#define EMBER_DAEMON_PEER_TLS_SOCKET_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "daemon/peer/peer_tls.h"
#include "ember/status.h"

// OpenSSL's connection type (<openssl/ssl.h>), declared here to keep OpenSSL out of
// includers.
typedef struct ssl_st SSL;

namespace ember::daemon {

class TlsSocket {
 public:
  using Clock = std::chrono::steady_clock;

  // Client side over `fd` (a connected TCP socket; owned from here on, closed on failure):
  // the handshake, verifying that the server's certificate comes from tls's CA and names
  // `server_name` (OpenSSL's X509_check_host: a subjectAltName DNS entry, or the CN when
  // the certificate has no DNS entry; IP entries are not looked at, as with kj, see
  // peer_connector.h), by `deadline`. kInvalidArgument for an empty `server_name`.
  static Result<std::unique_ptr<TlsSocket>> Connect(PeerTls& tls, int fd,
                                                    const std::string& server_name,
                                                    Clock::time_point deadline);
  // Server side over an accepted socket `fd` (owned, closed on failure): the handshake,
  // requiring the client's certificate from the CA, by `deadline`.
  static Result<std::unique_ptr<TlsSocket>> Accept(PeerTls& tls, int fd,
                                                   Clock::time_point deadline);

  // Sends close_notify if it can without waiting (not after an error or Cancel), closes
  // the socket. Not while another thread is in a call or in Cancel().
  ~TlsSocket();

  TlsSocket(const TlsSocket&) = delete;
  TlsSocket& operator=(const TlsSocket&) = delete;

  // The CN of the peer's certificate (empty when it has none).
  const std::string& peer_common_name() const { return peer_common_name_; }
  // The cipher suite negotiated, e.g. "TLS_AES_128_GCM_SHA256".
  const std::string& cipher() const { return cipher_; }

  // Writes all `size` bytes by `deadline`, straight from `data` (OpenSSL encrypts each
  // record into its own buffer and sends it).
  Status Write(const void* data, size_t size, Clock::time_point deadline);

  // Reads exactly `size` bytes into `data` by `deadline`: true; false when the stream
  // ended cleanly (close_notify or EOF) before the first of them (nothing was written to
  // data). The end of the stream after some of the bytes is an error (kUnavailable).
  // OpenSSL decrypts each record in its read buffer and copies the plaintext into `data`.
  Result<bool> Read(void* data, size_t size, Clock::time_point deadline);

  // From any thread: the call in progress and every later one fail with kCancelled
  // (a flag, and shutdown(2) of the socket, which wakes a blocked wait). Idempotent.
  void Cancel();

 private:
  // What a call is doing, for its errors.
  struct Progress {
    const char* op;    // "TLS handshake", "TLS read", "TLS write"
    const char* verb;  // "read", "written"; null for the handshake
    Clock::time_point start;
    size_t done;
    size_t total;
  };

  // Takes `fd` and `ssl`; closes and frees them when destroyed.
  TlsSocket(int fd, SSL* ssl);

  static Result<std::unique_ptr<TlsSocket>> Handshake(PeerTls& tls, int fd, bool client,
                                                      const std::string& server_name,
                                                      Clock::time_point deadline);
  Status RunHandshake(bool client, const std::string& server_name,
                      Clock::time_point deadline);
  // After an SSL call returned `ret`: Ok when it only has to wait (having waited for the
  // socket, by the deadline); otherwise the failure. `eof` (may be null) is set instead of
  // failing when the stream ended cleanly.
  Status AfterFailedCall(int ret, int saved_errno, const Progress& progress,
                         Clock::time_point deadline, bool* eof);
  // Waits by `deadline` until the socket has `events` (POLLIN / POLLOUT), or has failed.
  Status WaitFor(short events, const Progress& progress, Clock::time_point deadline);
  // " (X of Y bytes read)", or "" for the handshake.
  static std::string Counted(const Progress& progress);
  // "<op> not done within N ms (X of Y bytes read)".
  static std::string Describe(const Progress& progress);
  static Status CancelledStatus(const Progress& progress);

  const int fd_;
  SSL* const ssl_;
  // The side, and the name the server's certificate must carry, for errors' hints.
  bool client_ = false;
  std::string server_name_;
  std::string peer_common_name_;
  std::string cipher_;
  // Set by Cancel() (any thread).
  std::atomic<bool> cancelled_{false};
  // Whether close_notify may be sent: the handshake done and no error since.
  bool healthy_ = false;
};

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_TLS_SOCKET_H_
