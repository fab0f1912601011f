#include "daemon/peer/peer_tls.h"

#include <kj/debug.h>
#include <kj/exception.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace ember::daemon {

namespace {

constexpr const char kOpensslPrefix[] = "OpenSSL error; message = ";

// "error:0A000086:SSL routines::certificate verify failed" -> "certificate verify failed".
std::string OpensslReason(const std::string& line) {
  if (line.rfind("error:", 0) != 0) return line;
  size_t at = 0;
  for (int field = 0; field < 4; ++field) {
    at = line.find(':', at);
    if (at == std::string::npos) return line;
    ++at;
  }
  return line.substr(at);
}

// Runs `make`, a constructor of kj's TLS types that throws on bad input, and turns its
// exception into kInvalidArgument "<what> <path>: <reason>".
template <typename T, typename Make>
Result<T> Parse(const std::string& what, const std::string& path, Make&& make) {
  kj::Maybe<T> made;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { made = make(); })) {
    return InvalidArgument(what + " " + path + ": " + DescribeTlsError(*e));
  }
  return kj::mv(KJ_ASSERT_NONNULL(made));
}

// Whether the PEM private key belongs to the first certificate of the PEM chain. kj's
// TlsContext does not check: OpenSSL drops a mismatched key silently, and every
// handshake would fail later.
bool KeyBelongsToCertificate(const std::string& cert_pem, const std::string& key_pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), &BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  if (cert_bio == nullptr || key_bio == nullptr) return false;
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), &X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  const bool belongs =
      cert != nullptr && key != nullptr && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  return belongs;
}

using UniqueBio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using UniqueX509 = std::unique_ptr<X509, decltype(&X509_free)>;
using UniqueStore = std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)>;

UniqueBio MemoryBio(const std::string& pem) {
  return UniqueBio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
}

// Whether the last PEM read stopped only because no PEM block was left (the end of a list
// of certificates), which it leaves as an error on the queue.
bool AtPemEnd() {
  const unsigned long error = ERR_peek_last_error();
  return ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE;
}

// TLS 1.3 suites and TLS 1.2 ciphers, AES-128-GCM first: the cheapest AEAD per byte with
// AES-NI, and as strong as needed; the server's order wins (both ends use this one).
constexpr const char kCipherSuites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// How much one socket read may take with read-ahead: several 16 KiB records at once.
constexpr size_t kReadBufferBytes = 64 * 1024;

// Fills `ctx` from the PEM texts (already checked by kj's parsers, so failures here are
// rare): kInvalidArgument naming the file and OpenSSL's reason.
Status ConfigureSslContext(SSL_CTX* ctx, const std::string& cert_path,
                           const std::string& cert_pem, const std::string& key_path,
                           const std::string& key_pem, const std::string& ca_path,
                           const std::string& ca_pem) {
  ERR_clear_error();
  // This node's certificate, then any intermediate certificates after it as its chain.
  UniqueBio cert_bio = MemoryBio(cert_pem);
  UniqueX509 cert(PEM_read_bio_X509_AUX(cert_bio.get(), nullptr, nullptr, nullptr),
                  &X509_free);
  if (cert == nullptr || SSL_CTX_use_certificate(ctx, cert.get()) != 1) {
    return InvalidArgument("certificate " + cert_path + ": " + TakeOpensslErrors());
  }
  for (;;) {
    UniqueX509 chain(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr),
                     &X509_free);
    if (chain == nullptr) {
      if (!AtPemEnd()) {
        return InvalidArgument("certificate " + cert_path + ": " + TakeOpensslErrors());
      }
      ERR_clear_error();
      break;
    }
    if (SSL_CTX_add0_chain_cert(ctx, chain.get()) != 1) {
      return InvalidArgument("certificate " + cert_path + ": " + TakeOpensslErrors());
    }
    chain.release();  // owned by ctx
  }

  UniqueBio key_bio = MemoryBio(key_pem);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (key == nullptr || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    return InvalidArgument("private key " + key_path + ": " + TakeOpensslErrors());
  }

  // The CA certificate(s) as the only trust anchors (no default paths), also named to
  // clients as the CAs whose certificates this node accepts.
  UniqueStore store(X509_STORE_new(), &X509_STORE_free);
  UniqueBio ca_bio = MemoryBio(ca_pem);
  int anchors = 0;
  for (;;) {
    UniqueX509 ca(PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr), &X509_free);
    if (ca == nullptr) {
      if (anchors == 0 || !AtPemEnd()) {
        return InvalidArgument("CA certificate " + ca_path + ": " + TakeOpensslErrors());
      }
      ERR_clear_error();
      break;
    }
    if (store == nullptr || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
        SSL_CTX_add_client_CA(ctx, ca.get()) != 1) {
      return InvalidArgument("CA certificate " + ca_path + ": " + TakeOpensslErrors());
    }
    ++anchors;
  }
  SSL_CTX_set_cert_store(ctx, store.release());  // owned by ctx

  const std::string files = cert_path + ", " + key_path + " and " + ca_path;
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_ciphersuites(ctx, kCipherSuites) != 1 ||
      SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return InvalidArgument("TLS settings from " + files + ": " + TakeOpensslErrors());
  }
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET |
                               SSL_OP_NO_RENEGOTIATION);
  // TLS 1.3 servers send session tickets after the handshake by default: bytes nobody
  // reads, which make a client that closes without reading reset the connection.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, kReadBufferBytes);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return Status::Ok();
}

}  // namespace

std::string TakeOpensslErrors(const std::string& fallback) {
  std::string reasons;
  std::vector<std::string> seen;
  unsigned long error;
  while ((error = ERR_get_error()) != 0) {
    const char* reason = ERR_reason_error_string(error);
    std::string text;
    if (reason != nullptr) {
      text = reason;
    } else {
      char buffer[256];
      ERR_error_string_n(error, buffer, sizeof(buffer));
      text = OpensslReason(buffer);
    }
    if (std::find(seen.begin(), seen.end(), text) != seen.end()) continue;
    seen.push_back(text);
    if (!reasons.empty()) reasons += "; ";
    reasons += text;
  }
  return reasons.empty() ? fallback : reasons;
}

void PeerTls::SslCtxFree::operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }

std::string DescribeTlsError(const kj::Exception& exception) {
  const std::string description = exception.getDescription().cStr();
  const size_t prefix = description.find(kOpensslPrefix);
  if (prefix == std::string::npos) return description;
  std::string reasons;
  size_t begin = prefix + sizeof(kOpensslPrefix) - 1;
  while (begin <= description.size()) {
    size_t end = description.find('\n', begin);
    if (end == std::string::npos) end = description.size();
    if (end > begin) {
      if (!reasons.empty()) reasons += "; ";
      reasons += OpensslReason(description.substr(begin, end - begin));
    }
    begin = end + 1;
  }
  return reasons.empty() ? description : reasons;
}

PeerTls::PeerTls(kj::TlsKeypair keypair, kj::TlsCertificate ca)
    : keypair_(kj::mv(keypair)), ca_(kj::mv(ca)) {}

Result<std::unique_ptr<PeerTls>> PeerTls::Load(Env& env, const std::string& cert_path,
                                               const std::string& key_path,
                                               const std::string& ca_path) {
  EMBER_ASSIGN_OR_RETURN(std::string cert_pem, env.ReadFile(cert_path));
  EMBER_ASSIGN_OR_RETURN(std::string key_pem, env.ReadFile(key_path));
  EMBER_ASSIGN_OR_RETURN(std::string ca_pem, env.ReadFile(ca_path));
  EMBER_ASSIGN_OR_RETURN(kj::TlsCertificate cert,
                         Parse<kj::TlsCertificate>("certificate", cert_path, [&] {
                           return kj::TlsCertificate(cert_pem);
                         }));
  EMBER_ASSIGN_OR_RETURN(kj::TlsPrivateKey key,
                         Parse<kj::TlsPrivateKey>("private key", key_path, [&] {
                           return kj::TlsPrivateKey(key_pem, nullptr);
                         }));
  EMBER_ASSIGN_OR_RETURN(kj::TlsCertificate ca,
                         Parse<kj::TlsCertificate>("CA certificate", ca_path, [&] {
                           return kj::TlsCertificate(ca_pem);
                         }));
  if (!KeyBelongsToCertificate(cert_pem, key_pem)) {
    return InvalidArgument("private key " + key_path + " does not belong to certificate " +
                           cert_path);
  }
  std::unique_ptr<PeerTls> tls(
      new PeerTls(kj::TlsKeypair{kj::mv(key), kj::mv(cert)}, kj::mv(ca)));
  kj::TlsContext::Options options;
  options.useSystemTrustStore = false;
  options.verifyClients = true;
  options.trustedCertificates = kj::arrayPtr(&tls->ca_, 1);
  options.defaultKeypair = tls->keypair_;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions(
                     [&] { tls->context_ = kj::heap<kj::TlsContext>(kj::mv(options)); })) {
    return InvalidArgument("TLS settings from " + cert_path + ", " + key_path + " and " +
                           ca_path + ": " + DescribeTlsError(*e));
  }
  tls->ssl_.reset(SSL_CTX_new(TLS_method()));
  if (tls->ssl_ == nullptr) {
    return InvalidArgument("TLS settings from " + cert_path + ", " + key_path + " and " +
                           ca_path + ": " + TakeOpensslErrors());
  }
  EMBER_RETURN_IF_ERROR(ConfigureSslContext(tls->ssl_.get(), cert_path, cert_pem, key_path,
                                            key_pem, ca_path, ca_pem));
  return tls;
}

}  // namespace ember::daemon
