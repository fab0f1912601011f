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

namespace ember::daemon {

// A kj::TlsContext with verifyClients = true, trustedCertificates = the CA only and
// defaultKeypair = this node's certificate and key, as both server (PeerListener) and
// client (ConnectToPeer). Immutable once made; used from the event loop's thread.
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

 private:
  PeerTls(kj::TlsKeypair keypair, kj::TlsCertificate ca);

  const kj::TlsKeypair keypair_;
  const kj::TlsCertificate ca_;
  kj::Own<kj::TlsContext> context_;
};

// A kj exception from the TLS layer, said shortly: OpenSSL's reason ("certificate verify
// failed", "tlsv1 alert unknown ca") without kj's "OpenSSL error; message = error:0A...:SSL
// routines::" decoration; other exceptions' descriptions unchanged.
std::string DescribeTlsError(const kj::Exception& exception);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_PEER_TLS_H_
