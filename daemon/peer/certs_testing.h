// Test helpers (tests only): per-test certificate authorities and node certificates made
// with the openssl command line (EC P-256), the way docs/service.md ("Several nodes")
// tells operators to make theirs. Every helper fails the running Catch2 test (REQUIRE)
// with openssl's output when a command fails.
#ifndef EMBER_DAEMON_PEER_CERTS_TESTING_H_
#define EMBER_DAEMON_PEER_CERTS_TESTING_H_

#include <string>

namespace ember::daemon {

// A certificate (PEM) and its private key (PEM).
struct TestKeypair {
  std::string cert_path;
  std::string key_path;
};

// The subjectAltName entries of a node that peers reach as 127.0.0.1 or localhost
// (the rule in peer_connector.h).
inline constexpr const char kLoopbackSans[] = "DNS:localhost,DNS:127.0.0.1,IP:127.0.0.1";

// A self-signed CA "CN=<name>": <dir>/<name>.pem and <dir>/<name>.key (`dir` exists).
TestKeypair MakeTestCa(const std::string& dir, const std::string& name);

// A node certificate "CN=<common_name>" signed by `ca`, with subjectAltName `sans` (in
// openssl's syntax; empty: none) and both TLS uses (server and client):
// <dir>/<common_name>.pem and <dir>/<common_name>.key.
TestKeypair MakeTestNodeCert(const std::string& dir, const TestKeypair& ca,
                             const std::string& common_name,
                             const std::string& sans = kLoopbackSans);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_PEER_CERTS_TESTING_H_
