// TlsSocket over real TCP loopback connections, with per-test certificates: mutual TLS,
// bulk bytes, refusals on both sides, deadlines, Cancel, the end of the stream, and peers
// that are not TLS. SIGPIPE keeps its default action here on purpose: a write that raised
// it would end the test.
#include "daemon/peer/tls_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/peer/certs_testing.h"
#include "daemon/peer/peer_tls.h"

namespace ember::daemon {
namespace {

using Clock = TlsSocket::Clock;
using namespace std::chrono_literals;
using SocketResult = Result<std::unique_ptr<TlsSocket>>;

Clock::time_point In(Clock::duration duration) { return Clock::now() + duration; }

long long MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// This file's PKI, made once: a CA with nodes "server" and "client" (loopback names), a
// node that names another host only, one with only an IP entry, one with no
// subjectAltName and CN "localhost", and a node of an unrelated CA. Each node's PeerTls
// trusts the first CA.
struct Pki {
  Pki() : dir(FreshTestDir("tls_socket_pki")) {
    ca = MakeTestCa(dir, "ca");
    const TestKeypair other_ca = MakeTestCa(dir, "other-ca");
    client_keys = MakeTestNodeCert(dir, ca, "client");
    stranger_keys = MakeTestNodeCert(dir, other_ca, "stranger");
    server = Load(MakeTestNodeCert(dir, ca, "server"), ca);
    client = Load(client_keys, ca);
    elsewhere = Load(MakeTestNodeCert(dir, ca, "elsewhere", "DNS:elsewhere.example"), ca);
    ip_only = Load(MakeTestNodeCert(dir, ca, "ip-only", "IP:127.0.0.1"), ca);
    cn_only = Load(MakeTestNodeCert(dir, ca, "localhost", ""), ca);
    stranger = Load(stranger_keys, ca);
  }
  // A PeerTls of its own for `node` (a test may change its SSL_CTX).
  std::unique_ptr<PeerTls> Reload(const TestKeypair& node) { return Load(node, ca); }
  std::unique_ptr<PeerTls> Load(const TestKeypair& node, const TestKeypair& trusted) {
    Result<std::unique_ptr<PeerTls>> tls =
        PeerTls::Load(*env, node.cert_path, node.key_path, trusted.cert_path);
    INFO(tls.status().ToString());
    REQUIRE(tls.ok());
    REQUIRE(tls.value()->ssl_context() != nullptr);
    return std::move(tls).value();
  }

  std::unique_ptr<Env> env = NewPosixEnv();
  std::string dir;
  TestKeypair ca, client_keys, stranger_keys;
  std::unique_ptr<PeerTls> server, client, elsewhere, ip_only, cn_only, stranger;
};

Pki& TestPki() {
  static Pki* const pki = new Pki();  // for the whole run: certificates take a while
  return *pki;
}

// A TCP listener on 127.0.0.1, port 0.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in address = Loopback(0);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(listen(fd_, 8) == 0);
    socklen_t length = sizeof(address);
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
  }
  ~Listener() { close(fd_); }

  // The next connection's socket; -1 on failure. Safe off the test's thread.
  int Accept() const { return accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC); }

  // A connected TCP socket to this listener.
  int Connect() const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address = Loopback(port_);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    return fd;
  }

 private:
  static sockaddr_in Loopback(uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return address;
  }

  int fd_ = -1;
  uint16_t port_ = 0;
};

// Both ends of one handshake: the server's Accept on its own thread, the client's Connect
// on the test's.
struct Handshake {
  SocketResult client;
  SocketResult server;
};

Handshake Shake(PeerTls& client_tls, PeerTls& server_tls,
                const std::string& server_name = "127.0.0.1") {
  Listener listener;
  std::future<SocketResult> accepted = std::async(std::launch::async, [&] {
    return TlsSocket::Accept(server_tls, listener.Accept(), In(5s));
  });
  SocketResult connected =
      TlsSocket::Connect(client_tls, listener.Connect(), server_name, In(5s));
  return Handshake{std::move(connected), accepted.get()};
}

struct Pair {
  std::unique_ptr<TlsSocket> client;
  std::unique_ptr<TlsSocket> server;
};

Pair Connected() {
  Handshake shake = Shake(*TestPki().client, *TestPki().server);
  INFO(shake.client.status().ToString());
  REQUIRE(shake.client.ok());
  INFO(shake.server.status().ToString());
  REQUIRE(shake.server.ok());
  return Pair{std::move(shake.client).value(), std::move(shake.server).value()};
}

std::vector<uint8_t> Pattern(size_t size) {
  std::vector<uint8_t> bytes(size);
  uint32_t state = 2463534242u;
  for (uint8_t& byte : bytes) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    byte = static_cast<uint8_t>(state);
  }
  return bytes;
}

TEST_CASE("TlsSocket: mutual TLS carries bulk bytes both ways") {
  Pair pair = Connected();
  CHECK(pair.client->peer_common_name() == "server");
  CHECK(pair.server->peer_common_name() == "client");
  CHECK(pair.client->cipher() == "TLS_AES_128_GCM_SHA256");
  CHECK(pair.server->cipher() == "TLS_AES_128_GCM_SHA256");

  const std::vector<uint8_t> sent = Pattern(16 << 20);

  // One Write, one Read of 16 MiB, client to server.
  {
    std::future<Status> writer = std::async(std::launch::async, [&] {
      return pair.client->Write(sent.data(), sent.size(), In(10s));
    });
    std::vector<uint8_t> received(sent.size());
    Result<bool> read = pair.server->Read(received.data(), received.size(), In(10s));
    const Status written = writer.get();
    INFO(written.ToString());
    CHECK(written.ok());
    INFO(read.status().ToString());
    REQUIRE(read.ok());
    CHECK(read.value());
    CHECK(std::memcmp(received.data(), sent.data(), sent.size()) == 0);
  }

  // Uneven chunks that cut records anywhere, server to client.
  {
    std::future<Status> writer = std::async(std::launch::async, [&] {
      size_t at = 0;
      for (size_t chunk : {size_t{1}, size_t{5}, size_t{16383}, size_t{16385},
                           size_t{70000}, size_t{1} << 20, sent.size()}) {
        chunk = std::min(chunk, sent.size() - at);
        Status status = pair.server->Write(sent.data() + at, chunk, In(10s));
        if (!status.ok()) return status;
        at += chunk;
      }
      return Status::Ok();
    });
    std::vector<uint8_t> received(sent.size());
    size_t at = 0;
    for (size_t chunk : {size_t{3}, size_t{100000}, size_t{17}, size_t{3 * 4096 + 1},
                         size_t{5} << 20, sent.size()}) {
      chunk = std::min(chunk, sent.size() - at);
      Result<bool> read = pair.client->Read(received.data() + at, chunk, In(10s));
      INFO(read.status().ToString());
      REQUIRE(read.ok());
      REQUIRE(read.value());
      at += chunk;
    }
    const Status written = writer.get();
    INFO(written.ToString());
    CHECK(written.ok());
    CHECK(std::memcmp(received.data(), sent.data(), sent.size()) == 0);
  }

  // A read of nothing needs nothing.
  Result<bool> empty = pair.client->Read(nullptr, 0, In(1s));
  REQUIRE(empty.ok());
  CHECK(empty.value());
}

TEST_CASE("TlsSocket: TLS 1.2 works too, with AES-128-GCM") {
  std::unique_ptr<PeerTls> client = TestPki().Reload(TestPki().client_keys);
  REQUIRE(SSL_CTX_set_max_proto_version(client->ssl_context(), TLS1_2_VERSION) == 1);
  Handshake shake = Shake(*client, *TestPki().server);
  INFO(shake.client.status().ToString());
  REQUIRE(shake.client.ok());
  INFO(shake.server.status().ToString());
  REQUIRE(shake.server.ok());
  CHECK(shake.client.value()->cipher() == "ECDHE-ECDSA-AES128-GCM-SHA256");
  CHECK(shake.server.value()->peer_common_name() == "client");
  const std::vector<uint8_t> sent = Pattern(100000);
  std::vector<uint8_t> received(sent.size());
  std::future<Status> writer = std::async(std::launch::async, [&] {
    return shake.server.value()->Write(sent.data(), sent.size(), In(5s));
  });
  Result<bool> read = shake.client.value()->Read(received.data(), received.size(), In(5s));
  CHECK(writer.get().ok());
  REQUIRE(read.ok());
  CHECK(std::memcmp(received.data(), sent.data(), sent.size()) == 0);

  // Here the server's refusal of a client certificate comes within the handshake.
  std::unique_ptr<PeerTls> stranger = TestPki().Reload(TestPki().stranger_keys);
  REQUIRE(SSL_CTX_set_max_proto_version(stranger->ssl_context(), TLS1_2_VERSION) == 1);
  Handshake refused = Shake(*stranger, *TestPki().server);
  REQUIRE_FALSE(refused.client.ok());
  INFO(refused.client.status().ToString());
  CHECK(refused.client.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(refused.client.status().message(),
             Catch::Contains("alert") && Catch::Contains("the server refused this node"));
  CHECK_FALSE(refused.server.ok());
}

TEST_CASE("TlsSocket: a client certificate from another CA is refused on both sides") {
  const Clock::time_point start = Clock::now();
  Handshake shake = Shake(*TestPki().stranger, *TestPki().server);
  REQUIRE_FALSE(shake.server.ok());
  INFO(shake.server.status().ToString());
  CHECK(shake.server.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(shake.server.status().message(),
             Catch::Contains("certificate verify failed") &&
                 Catch::Contains("the client's certificate must come from this node's CA"));

  // With TLS 1.3 the client's handshake is done before the server checks its
  // certificate: the refusal comes with the first read.
  Status client = shake.client.status();
  if (shake.client.ok()) {
    char byte;
    Result<bool> read = shake.client.value()->Read(&byte, 1, In(3s));
    REQUIRE_FALSE(read.ok());
    client = read.status();
  }
  INFO(client.ToString());
  CHECK(client.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(client.message(), Catch::Contains("alert"));
  CHECK(MillisSince(start) < 2000);
}

TEST_CASE("TlsSocket: the client refuses a server certificate that does not fit") {
  SECTION("it names another host") {
    Handshake shake = Shake(*TestPki().client, *TestPki().elsewhere);
    REQUIRE_FALSE(shake.client.ok());
    INFO(shake.client.status().ToString());
    CHECK(shake.client.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(shake.client.status().message(),
               Catch::StartsWith("TLS handshake failed: certificate verify failed") &&
                   Catch::Contains("hostname mismatch") && Catch::Contains("'127.0.0.1'"));
    // The server hears of it as an alert, at once.
    REQUIRE_FALSE(shake.server.ok());
    INFO(shake.server.status().ToString());
    CHECK(shake.server.status().code() != StatusCode::kDeadlineExceeded);
  }
  SECTION("it names the address in an IP entry only (X509_check_host, as with kj)") {
    Handshake shake = Shake(*TestPki().client, *TestPki().ip_only);
    REQUIRE_FALSE(shake.client.ok());
    INFO(shake.client.status().ToString());
    CHECK(shake.client.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(shake.client.status().message(), Catch::Contains("hostname mismatch"));
  }
  SECTION("it comes from another CA") {
    Handshake shake = Shake(*TestPki().client, *TestPki().stranger);
    REQUIRE_FALSE(shake.client.ok());
    INFO(shake.client.status().ToString());
    CHECK(shake.client.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(shake.client.status().message(),
               Catch::Contains("certificate verify failed") &&
                   Catch::Contains("the server's certificate must come from this node's CA"));
  }
  SECTION("but a CN is enough when the certificate has no subjectAltName") {
    Handshake shake = Shake(*TestPki().client, *TestPki().cn_only, "localhost");
    INFO(shake.client.status().ToString());
    REQUIRE(shake.client.ok());
    CHECK(shake.client.value()->peer_common_name() == "localhost");
    REQUIRE(shake.server.ok());
  }
  SECTION("an empty server name is refused rather than unchecked") {
    Listener listener;
    SocketResult connected =
        TlsSocket::Connect(*TestPki().client, listener.Connect(), "", In(1s));
    REQUIRE_FALSE(connected.ok());
    CHECK(connected.status().code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("TlsSocket: a read from a silent peer ends at the deadline") {
  Pair pair = Connected();
  char buffer[16];
  const Clock::time_point start = Clock::now();
  Result<bool> read = pair.client->Read(buffer, sizeof(buffer), start + 200ms);
  const long long elapsed = MillisSince(start);
  REQUIRE_FALSE(read.ok());
  INFO(read.status().ToString());
  CHECK(read.status().code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(read.status().message(),
             Catch::StartsWith("TLS read not done within") &&
                 Catch::EndsWith("(0 of 16 bytes read)"));
  CHECK(elapsed >= 200);
  CHECK(elapsed < 1500);
}

TEST_CASE("TlsSocket: Cancel ends a blocked call from another thread") {
  Pair pair = Connected();
  SECTION("a read") {
    std::vector<uint8_t> buffer(1000);
    const Clock::time_point start = Clock::now();
    std::future<Result<bool>> reader = std::async(std::launch::async, [&] {
      return pair.client->Read(buffer.data(), buffer.size(), In(10s));
    });
    std::this_thread::sleep_for(100ms);
    pair.client->Cancel();
    Result<bool> read = reader.get();
    CHECK(MillisSince(start) < 2000);
    REQUIRE_FALSE(read.ok());
    INFO(read.status().ToString());
    CHECK(read.status().code() == StatusCode::kCancelled);
    CHECK(read.status().message() == "TLS read cancelled (0 of 1000 bytes read)");
  }
  SECTION("a write the peer does not read") {
    const std::vector<uint8_t> sent(64 << 20, 7);
    const Clock::time_point start = Clock::now();
    std::future<Status> writer = std::async(std::launch::async, [&] {
      return pair.client->Write(sent.data(), sent.size(), In(10s));
    });
    std::this_thread::sleep_for(200ms);
    pair.client->Cancel();
    const Status written = writer.get();
    CHECK(MillisSince(start) < 2000);
    INFO(written.ToString());
    CHECK(written.code() == StatusCode::kCancelled);
    CHECK_THAT(written.message(), Catch::StartsWith("TLS write cancelled ("));
  }
  // Later calls fail the same way, at once.
  const char byte = 1;
  CHECK(pair.client->Write(&byte, 1, In(1s)).code() == StatusCode::kCancelled);
  pair.client->Cancel();  // again: nothing more happens
}

TEST_CASE("TlsSocket: the end of the stream") {
  Pair pair = Connected();
  std::vector<uint8_t> buffer(1000);
  SECTION("close_notify before a read: false") {
    pair.server.reset();
    Result<bool> read = pair.client->Read(buffer.data(), buffer.size(), In(2s));
    INFO(read.status().ToString());
    REQUIRE(read.ok());
    CHECK_FALSE(read.value());
  }
  SECTION("EOF without close_notify before a read: false") {
    pair.server->Cancel();  // no close_notify from here on
    pair.server.reset();
    Result<bool> read = pair.client->Read(buffer.data(), buffer.size(), In(2s));
    INFO(read.status().ToString());
    REQUIRE(read.ok());
    CHECK_FALSE(read.value());
  }
  SECTION("the end after half of the bytes: kUnavailable") {
    const std::vector<uint8_t> half = Pattern(500);
    REQUIRE(pair.server->Write(half.data(), half.size(), In(2s)).ok());
    pair.server.reset();
    Result<bool> read = pair.client->Read(buffer.data(), buffer.size(), In(2s));
    REQUIRE_FALSE(read.ok());
    INFO(read.status().ToString());
    CHECK(read.status().code() == StatusCode::kUnavailable);
    CHECK(read.status().message() == "TLS read: the connection ended after 500 of 1000 bytes");
    CHECK(std::memcmp(buffer.data(), half.data(), half.size()) == 0);
  }
  SECTION("a write to a peer that went away: kUnavailable, no SIGPIPE") {
    pair.server.reset();
    const std::vector<uint8_t> sent(4 << 20, 7);
    Status written;
    for (int i = 0; i < 16 && written.ok(); ++i) {
      written = pair.client->Write(sent.data(), sent.size(), In(2s));
    }
    INFO(written.ToString());
    CHECK(written.code() == StatusCode::kUnavailable);
    CHECK_THAT(written.message(), Catch::StartsWith("TLS write failed: "));
  }
}

TEST_CASE("TlsSocket: Accept fails at once on a peer that does not speak TLS") {
  Listener listener;
  std::future<SocketResult> accepted = std::async(std::launch::async, [&] {
    return TlsSocket::Accept(*TestPki().server, listener.Accept(), In(3s));
  });
  int raw = listener.Connect();
  const Clock::time_point start = Clock::now();
  SECTION("garbage") {
    const std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    REQUIRE(send(raw, garbage.data(), garbage.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(garbage.size()));
    SocketResult server = accepted.get();
    CHECK(MillisSince(start) < 1000);
    REQUIRE_FALSE(server.ok());
    INFO(server.status().ToString());
    CHECK(server.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(server.status().message(), Catch::StartsWith("TLS handshake failed: "));
  }
  SECTION("a connection closed at once") {
    close(raw);
    raw = -1;
    SocketResult server = accepted.get();
    CHECK(MillisSince(start) < 1000);
    REQUIRE_FALSE(server.ok());
    INFO(server.status().ToString());
    CHECK(server.status().code() == StatusCode::kUnavailable);
    CHECK(server.status().message() == "TLS handshake failed: the connection ended");
  }
  if (raw >= 0) close(raw);
}

TEST_CASE("TlsSocket: a handshake with a silent peer ends at the deadline") {
  Listener listener;
  const int raw = listener.Connect();
  const Clock::time_point start = Clock::now();
  SocketResult server = TlsSocket::Accept(*TestPki().server, listener.Accept(), start + 200ms);
  const long long elapsed = MillisSince(start);
  REQUIRE_FALSE(server.ok());
  INFO(server.status().ToString());
  CHECK(server.status().code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(server.status().message(), Catch::StartsWith("TLS handshake not done within"));
  CHECK(elapsed >= 200);
  CHECK(elapsed < 1500);
  close(raw);
}

}  // namespace
}  // namespace ember::daemon
