// The TLS settings of daemon-to-daemon connections (config key `tls`): this node's
// certificate and key, and the one CA every node's certificate must come from. Both sides
// of a connection present a certificate (mutual TLS); the system's trust store is not
// used.
#ifndef EMBER_DAEMON_PEER_PEER_TLS_H_
#define EMBER_DAEMON_PEER_PEER_TLS_H_

#include <kj/compat/tls.h>

#include <memory>
#include <string>

#include "common/env.h"
#include "ember/status.h"

// OpenSSL's context type (<openssl/ssl.h>), declared here to keep OpenSSL out of includers.
typedef struct ssl_ctx_st SSL_CTX;

namespace ember::daemon {

// A kj::TlsContext with verifyClients = true, trustedCertificates = the CA only and
// defaultKeypair = this node's certificate and key, as both server (PeerListener) and
// client (ConnectToPeer), used from the event loop's thread; and an OpenSSL SSL_CTX with
// the same identity and rules for TlsSocket (tls_socket.h). Immutable once made.
class PeerTls {
 public:
  // Reads the three PEM files through `env`. kNotFound / errno's status naming the file
  // when one cannot be read; kInvalidArgument naming the file when it holds no PEM
  // certificate (cert, ca) or private key (key), or when the key does not belong to the
  // certificate.
  static Result<std::unique_ptr<PeerTls>> Load(Env& env, const std::string& cert_path,
                                               const std::string& key_path,
                                               const std::string& ca_path);

  kj::TlsContext& context() { return *context_; }

  // The same identity and rules for connections not served by kj (TlsSocket): this node's
  // certificate and key, the CA as the only trust anchor, the peer's certificate required
  // (both as server and client), TLS 1.2 at least. Thread-safe (SSL_new from any thread).
  // Also: AES-128-GCM preferred (the fastest bulk cipher with AES-NI), no session tickets
  // or session cache (connections are long-lived), no TLS 1.2 renegotiation, read-ahead
  // (one socket read takes whatever arrived, up to 64 KiB), partial writes.
  SSL_CTX* ssl_context() const { return ssl_.get(); }

 private:
  struct SslCtxFree {
    void operator()(SSL_CTX* ctx) const;
  };

  PeerTls(kj::TlsKeypair keypair, kj::TlsCertificate ca);

  const kj::TlsKeypair keypair_;
  const kj::TlsCertificate ca_;
  kj::Own<kj::TlsContext> context_;
  std::unique_ptr<SSL_CTX, SslCtxFree> ssl_;
};

// A kj exception from the TLS layer, said shortly: OpenSSL's reason ("certificate verify
// failed", "tlsv1 alert unknown ca") without kj's "OpenSSL error; message = error:0A...:SSL
// routines::" decoration; other exceptions' descriptions unchanged.
std::string DescribeTlsError(const kj::Exception& exception);

// This thread's OpenSSL error queue, said the same way ("certificate verify failed; ..."),
// and emptied; `fallback` when it is empty.
std::string TakeOpensslErrors(const std::string& fallback = "unknown OpenSSL error");

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_PEER_TLS_H_
