#include "daemon/peer/tls_socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <utility>

namespace ember::daemon {

namespace {

// A BIO over a socket like OpenSSL's socket BIO, except that it sends with MSG_NOSIGNAL:
// writing to a connection the peer closed fails with EPIPE instead of raising SIGPIPE,
// whose default action would end the process without a word. The socket is the caller's
// (TlsSocket closes it). Reads and writes are single recv/send calls on the non-blocking
// socket; EAGAIN sets the retry flags that make SSL_* say WANT_READ / WANT_WRITE.
int BioFd(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int SocketBioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  for (;;) {
    const ssize_t sent = send(BioFd(bio), data, static_cast<size_t>(size), MSG_NOSIGNAL);
    if (sent >= 0) return static_cast<int>(sent);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    return -1;
  }
}

int SocketBioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  for (;;) {
    const ssize_t got = recv(BioFd(bio), data, static_cast<size_t>(size), 0);
    if (got > 0) return static_cast<int>(got);
    if (got == 0) {
      // What lets OpenSSL 3 tell the end of the stream from an error (BIO_eof).
      BIO_set_flags(bio, BIO_FLAGS_IN_EOF);
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    return -1;
  }
}

long SocketBioCtrl(BIO* bio, int command, long, void*) {
  switch (command) {
    case BIO_CTRL_FLUSH:
      return 1;  // nothing buffered here
    case BIO_CTRL_EOF:
      return BIO_test_flags(bio, BIO_FLAGS_IN_EOF) != 0 ? 1 : 0;
    default:
      return 0;  // not supported (pending counts, kTLS, ...)
  }
}

// Made once and kept for the process's life (BIOs point at it).
BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* made =
        BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ember socket (MSG_NOSIGNAL)");
    if (made != nullptr) {
      BIO_meth_set_write(made, SocketBioWrite);
      BIO_meth_set_read(made, SocketBioRead);
      BIO_meth_set_ctrl(made, SocketBioCtrl);
    }
    return made;
  }();
  return method;
}

BIO* NewSocketBio(int fd) {
  BIO_METHOD* method = SocketBioMethod();
  if (method == nullptr) return nullptr;
  BIO* bio = BIO_new(method);
  if (bio == nullptr) return nullptr;
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  return bio;
}

// The CN of `cert`'s subject in UTF-8; empty when it has none.
std::string CommonName(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index < 0) return "";
  unsigned char* utf8 = nullptr;
  const int length =
      ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index)));
  if (length < 0) return "";
  std::string name(reinterpret_cast<const char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  return name;
}

// Whether the error at the head of this thread's queue is a TLS alert the peer sent
// ("tlsv1 alert unknown ca"), as opposed to one this end raised.
bool PeerSentAlert() {
  const unsigned long error = ERR_peek_error();
  return ERR_GET_LIB(error) == ERR_LIB_SSL && ERR_GET_REASON(error) >= SSL_AD_REASON_OFFSET;
}

// Whether the error at the head of the queue is OpenSSL 3's report of an EOF without
// close_notify.
bool UnexpectedEof() {
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
  const unsigned long error = ERR_peek_error();
  return ERR_GET_LIB(error) == ERR_LIB_SSL &&
         ERR_GET_REASON(error) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
#else
  return false;
#endif
}

}  // namespace

TlsSocket::TlsSocket(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}

TlsSocket::~TlsSocket() {
  if (healthy_ && !cancelled_.load()) {
    // One try on the non-blocking socket: close_notify goes out unless the socket's
    // buffer is full; the peer's close_notify is not waited for.
    ERR_clear_error();
    SSL_shutdown(ssl_);
    ERR_clear_error();
  }
  SSL_free(ssl_);  // and the BIO
  close(fd_);
}

Result<std::unique_ptr<TlsSocket>> TlsSocket::Connect(PeerTls& tls, int fd,
                                                      const std::string& server_name,
                                                      Clock::time_point deadline) {
  return Handshake(tls, fd, /*client=*/true, server_name, deadline);
}

Result<std::unique_ptr<TlsSocket>> TlsSocket::Accept(PeerTls& tls, int fd,
                                                     Clock::time_point deadline) {
  return Handshake(tls, fd, /*client=*/false, "", deadline);
}

Result<std::unique_ptr<TlsSocket>> TlsSocket::Handshake(PeerTls& tls, int fd, bool client,
                                                        const std::string& server_name,
                                                        Clock::time_point deadline) {
  if (fd < 0) return InvalidArgument("TLS handshake: no socket (fd " + std::to_string(fd) + ")");
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus("TLS handshake: making the socket non-blocking", err);
  }
  // Each record goes out at once (a row's last one must not wait for an ACK). Best effort:
  // it fails only on sockets that are not TCP, which work without it.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  ERR_clear_error();
  SSL* ssl = SSL_new(tls.ssl_context());
  if (ssl == nullptr) {
    close(fd);
    return Internal("TLS handshake: SSL_new: " + TakeOpensslErrors());
  }
  std::unique_ptr<TlsSocket> socket(new TlsSocket(fd, ssl));  // closes fd from here on
  BIO* bio = NewSocketBio(fd);
  if (bio == nullptr) return Internal("TLS handshake: a socket BIO: " + TakeOpensslErrors());
  SSL_set_bio(ssl, bio, bio);  // one reference, owned by ssl
  EMBER_RETURN_IF_ERROR(socket->RunHandshake(client, server_name, deadline));
  return socket;
}

Status TlsSocket::RunHandshake(bool client, const std::string& server_name,
                               Clock::time_point deadline) {
  client_ = client;
  server_name_ = server_name;
  if (client) {
    // An empty name would switch the name check off.
    if (server_name.empty() ||
        X509_VERIFY_PARAM_set1_host(SSL_get0_param(ssl_), server_name.data(),
                                    server_name.size()) != 1) {
      ERR_clear_error();
      return InvalidArgument("TLS handshake: bad server name '" + server_name + "'");
    }
    SSL_set_connect_state(ssl_);
  } else {
    SSL_set_accept_state(ssl_);
  }
  const Progress progress{"TLS handshake", nullptr, Clock::now(), 0, 0};
  for (;;) {
    if (cancelled_.load()) return CancelledStatus(progress);
    ERR_clear_error();
    errno = 0;
    const int ret = SSL_do_handshake(ssl_);
    const int saved_errno = errno;
    if (ret == 1) break;
    EMBER_RETURN_IF_ERROR(AfterFailedCall(ret, saved_errno, progress, deadline, nullptr));
  }
  // SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT already failed the handshake
  // otherwise; checked again so that a change of those settings cannot let a peer in.
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr || SSL_get_verify_result(ssl_) != X509_V_OK) {
    return FailedPrecondition("TLS handshake: the peer's certificate was not verified");
  }
  peer_common_name_ = CommonName(cert);
  cipher_ = SSL_get_cipher_name(ssl_);
  healthy_ = true;
  return Status::Ok();
}

Status TlsSocket::Write(const void* data, size_t size, Clock::time_point deadline) {
  const char* const bytes = static_cast<const char*>(data);
  Progress progress{"TLS write", "written", Clock::now(), 0, size};
  while (progress.done < size) {
    if (cancelled_.load()) return CancelledStatus(progress);
    ERR_clear_error();
    errno = 0;
    size_t written = 0;
    // With SSL_MODE_ENABLE_PARTIAL_WRITE this returns after each record that went out,
    // so progress is known; a retry after WANT_WRITE passes the same bytes again.
    const int ret = SSL_write_ex(ssl_, bytes + progress.done, size - progress.done, &written);
    const int saved_errno = errno;
    if (ret == 1) {
      progress.done += written;
      continue;
    }
    EMBER_RETURN_IF_ERROR(AfterFailedCall(ret, saved_errno, progress, deadline, nullptr));
  }
  return Status::Ok();
}

Result<bool> TlsSocket::Read(void* data, size_t size, Clock::time_point deadline) {
  char* const bytes = static_cast<char*>(data);
  Progress progress{"TLS read", "read", Clock::now(), 0, size};
  while (progress.done < size) {
    if (cancelled_.load()) return CancelledStatus(progress);
    ERR_clear_error();
    errno = 0;
    size_t got = 0;
    const int ret = SSL_read_ex(ssl_, bytes + progress.done, size - progress.done, &got);
    const int saved_errno = errno;
    if (ret == 1) {
      progress.done += got;
      continue;
    }
    bool ended = false;
    EMBER_RETURN_IF_ERROR(AfterFailedCall(ret, saved_errno, progress, deadline, &ended));
    if (ended) {
      if (progress.done == 0) return false;
      return Unavailable("TLS read: the connection ended after " +
                         std::to_string(progress.done) + " of " + std::to_string(size) +
                         " bytes");
    }
  }
  return true;
}

void TlsSocket::Cancel() {
  cancelled_.store(true);
  // Wakes a poll(2) in progress (the socket becomes readable and writable at once) and
  // makes every later recv/send end; the fd stays open until the destructor.
  shutdown(fd_, SHUT_RDWR);
}

Status TlsSocket::AfterFailedCall(int ret, int saved_errno, const Progress& progress,
                                  Clock::time_point deadline, bool* eof) {
  const int error = SSL_get_error(ssl_, ret);
  if (cancelled_.load()) {
    healthy_ = false;
    ERR_clear_error();
    return CancelledStatus(progress);
  }
  if (error == SSL_ERROR_WANT_READ) return WaitFor(POLLIN, progress, deadline);
  if (error == SSL_ERROR_WANT_WRITE) return WaitFor(POLLOUT, progress, deadline);
  healthy_ = false;

  const std::string op = progress.op;
  const std::string suffix = Counted(progress);
  // The end of the stream: close_notify, or EOF without it (OpenSSL 3 says that as an
  // SSL error, 1.1 as a syscall error with nothing to tell).
  if (error == SSL_ERROR_ZERO_RETURN ||
      (error == SSL_ERROR_SYSCALL && saved_errno == 0 && ERR_peek_error() == 0) ||
      (error == SSL_ERROR_SSL && UnexpectedEof())) {
    ERR_clear_error();
    if (eof != nullptr) {
      *eof = true;
      return Status::Ok();
    }
    return Unavailable(op + " failed: the connection ended" + suffix);
  }
  if (error == SSL_ERROR_SYSCALL) {
    // Reset, broken pipe and the like.
    const std::string reason = saved_errno != 0
                                   ? ErrnoStatus(op + " failed", saved_errno).message()
                                   : op + " failed: " + TakeOpensslErrors();
    ERR_clear_error();
    return Unavailable(reason + suffix);
  }
  if (error != SSL_ERROR_SSL) {
    ERR_clear_error();
    return Internal(op + " failed: SSL_get_error " + std::to_string(error) + suffix);
  }

  const bool alert = PeerSentAlert();
  const bool no_certificate = ERR_GET_LIB(ERR_peek_error()) == ERR_LIB_SSL &&
                              ERR_GET_REASON(ERR_peek_error()) ==
                                  SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE;
  const long verify = SSL_get_verify_result(ssl_);
  std::string reasons = TakeOpensslErrors();
  if (progress.verb == nullptr) {
    // The handshake: certificates that do not fit, or a peer that does not speak TLS.
    std::string hint;
    if (verify != X509_V_OK) {
      reasons += std::string(": ") + X509_verify_cert_error_string(verify);
      hint = client_ ? " (the server's certificate must come from this node's CA and name '" +
                           server_name_ + "' in a subjectAltName DNS entry)"
                     : " (the client's certificate must come from this node's CA)";
    } else if (alert) {
      hint = client_ ? " (the server refused this node's certificate: it must come from "
                       "the server's CA)"
                     : " (the client refused this node's certificate: it must come from "
                       "the client's CA and name the host the client connected to)";
    } else if (no_certificate) {
      hint = " (the client must present a certificate from this node's CA)";
    } else {
      hint = " (the peer does not speak TLS, or no TLS version or cipher this node accepts)";
    }
    return FailedPrecondition(op + " failed: " + reasons + hint);
  }
  if (alert) {
    // With TLS 1.3 the client's handshake is done before the server has checked the
    // client's certificate: a refusal arrives at the client's first read.
    const std::string hint = client_ ? " (the server may have refused this node's "
                                       "certificate: it must come from the server's CA)"
                                     : "";
    return FailedPrecondition(op + " failed: the peer sent a TLS alert: " + reasons + hint +
                              suffix);
  }
  return Unavailable(op + " failed: " + reasons + suffix);
}

Status TlsSocket::WaitFor(short events, const Progress& progress, Clock::time_point deadline) {
  for (;;) {
    if (cancelled_.load()) {
      healthy_ = false;
      return CancelledStatus(progress);
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      healthy_ = false;
      return DeadlineExceeded(Describe(progress));
    }
    const long long wait_ms =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd poll_fd{fd_, events, 0};
    const int ready = poll(&poll_fd, 1, static_cast<int>(std::min<long long>(wait_ms, INT_MAX)));
    // The event, or an error or hang-up that the next SSL call reports.
    if (ready > 0) return Status::Ok();
    if (ready < 0 && errno != EINTR) {
      const int err = errno;
      healthy_ = false;
      return ErrnoStatus(std::string(progress.op) + ": poll", err);
    }
  }
}

std::string TlsSocket::Counted(const Progress& progress) {
  if (progress.verb == nullptr) return "";
  return " (" + std::to_string(progress.done) + " of " + std::to_string(progress.total) +
         " bytes " + progress.verb + ")";
}

std::string TlsSocket::Describe(const Progress& progress) {
  const long long within_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  Clock::now() - progress.start)
                                  .count();
  return std::string(progress.op) + " not done within " + std::to_string(within_ms) + " ms" +
         Counted(progress);
}

Status TlsSocket::CancelledStatus(const Progress& progress) {
  return Cancelled(std::string(progress.op) + " cancelled" + Counted(progress));
}

}  // namespace ember::daemon
