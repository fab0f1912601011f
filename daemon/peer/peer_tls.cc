#include "daemon/peer/peer_tls.h"

#include <kj/debug.h>
#include <kj/exception.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <utility>

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

}  // namespace

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
  return tls;
}

}  // namespace ember::daemon
