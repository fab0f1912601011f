#include "daemon/peer/peer_tls.h"

#include <catch2/catch.hpp>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/peer/certs_testing.h"

namespace ember::daemon {
namespace {

TEST_CASE("PeerTls loads a node certificate, its key and the CA") {
  const std::string dir = FreshTestDir("tls_loads");
  const TestKeypair ca = MakeTestCa(dir, "ca");
  const TestKeypair node = MakeTestNodeCert(dir, ca, "node0");
  auto env = NewPosixEnv();
  Result<std::unique_ptr<PeerTls>> tls =
      PeerTls::Load(*env, node.cert_path, node.key_path, ca.cert_path);
  INFO(tls.status().ToString());
  REQUIRE(tls.ok());
}

TEST_CASE("PeerTls names the file that is missing or holds no PEM") {
  const std::string dir = FreshTestDir("tls_errors");
  const TestKeypair ca = MakeTestCa(dir, "ca");
  const TestKeypair node = MakeTestNodeCert(dir, ca, "node0");
  const TestKeypair other = MakeTestNodeCert(dir, ca, "node1");
  const std::string garbage = WriteTempFile("tls_errors/garbage.pem", "not a PEM file\n");
  auto env = NewPosixEnv();

  Result<std::unique_ptr<PeerTls>> missing =
      PeerTls::Load(*env, node.cert_path, node.key_path, dir + "/nope.pem");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(dir + "/nope.pem"));

  struct Case {
    std::string cert, key, ca, expected;
  };
  for (const Case& c : {
           Case{garbage, node.key_path, ca.cert_path, "certificate " + garbage + ": "},
           Case{node.key_path, node.key_path, ca.cert_path, "certificate " + node.key_path},
           Case{node.cert_path, garbage, ca.cert_path, "private key " + garbage + ": "},
           Case{node.cert_path, node.cert_path, ca.cert_path, "private key " + node.cert_path},
           Case{node.cert_path, node.key_path, garbage, "CA certificate " + garbage + ": "},
           Case{node.cert_path, other.key_path, ca.cert_path,
                "private key " + other.key_path + " does not belong to certificate " +
                    node.cert_path},
       }) {
    INFO(c.cert << " " << c.key << " " << c.ca);
    Result<std::unique_ptr<PeerTls>> tls = PeerTls::Load(*env, c.cert, c.key, c.ca);
    REQUIRE_FALSE(tls.ok());
    CHECK(tls.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(tls.status().message(), Catch::StartsWith(c.expected));
  }
}

kj::Exception Failure(kj::Exception::Type type, const char* description) {
  return kj::Exception(type, __FILE__, __LINE__, kj::str(description));
}

TEST_CASE("DescribeTlsError keeps OpenSSL's reasons only") {
  using Type = kj::Exception::Type;
  CHECK(DescribeTlsError(Failure(
            Type::FAILED,
            "OpenSSL error; message = error:0A000086:SSL routines::certificate verify failed")) ==
        "certificate verify failed");
  CHECK(DescribeTlsError(Failure(Type::FAILED,
                                 "OpenSSL error; message = error:1:a::first\nerror:2:b::second")) ==
        "first; second");
  CHECK(DescribeTlsError(Failure(Type::DISCONNECTED, "connect(): Connection refused")) ==
        "connect(): Connection refused");
}

}  // namespace
}  // namespace ember::daemon
