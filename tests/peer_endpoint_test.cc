// A real emberd with `listen: 127.0.0.1:0` and mutual TLS from a per-test CA: it writes
// the bound port to <state_dir>/peer.port, a node with a certificate from the CA says
// hello over TCP, and one from another CA is refused and logged.
#include <kj/async-io.h>

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "common/env.h"
#include "daemon/peer/certs_testing.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/peer_tls.h"
#include "daemon/rpc/peer_client.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

using daemon::ConnectToPeer;
using daemon::MakeTestCa;
using daemon::MakeTestNodeCert;
using daemon::PeerTls;
using daemon::TestKeypair;

std::unique_ptr<PeerTls> LoadTls(const TestKeypair& node, const TestKeypair& ca) {
  auto env = NewPosixEnv();
  auto tls = PeerTls::Load(*env, node.cert_path, node.key_path, ca.cert_path);
  INFO(tls.status().ToString());
  REQUIRE(tls.ok());
  return std::move(tls).value();
}

TEST_CASE("emberd listens for peers with mutual TLS and says hello") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string certs = dir + "/certs";
  REQUIRE(NewPosixEnv()->CreateDirs(certs).ok());
  const TestKeypair ca = MakeTestCa(certs, "ca");
  const TestKeypair other_ca = MakeTestCa(certs, "other-ca");
  MakeTestNodeCert(certs, ca, "node-a");
  const TestKeypair node_b = MakeTestNodeCert(certs, ca, "node-b");
  const TestKeypair stranger = MakeTestNodeCert(certs, other_ca, "stranger");
  // Relative paths: resolved against the config file's directory.
  Daemon daemon(dir, WriteDaemonConfig(dir, "listen: 127.0.0.1:0\n"
                                            "tls: {cert: certs/node-a.pem, key: certs/node-a.key,"
                                            " ca: certs/ca.pem}\n"
                                            "node: node-a\n"));
  daemon.Start();
  const std::string port_text = ReadFileOrEmpty(dir + "/state/peer.port");
  INFO(daemon.log());
  REQUIRE(!port_text.empty());
  const int port = std::stoi(port_text);
  REQUIRE(port > 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  CHECK(daemon.log().find("listening for peers on " + address + " (tls: on) as node 'node-a'") !=
        std::string::npos);

  auto io = kj::setupAsyncIo();
  auto tls = LoadTls(node_b, ca);
  auto connection = ConnectToPeer(*io.provider, tls.get(), address).wait(io.waitScope);
  INFO(connection.status().ToString());
  REQUIRE(connection.ok());
  auto hello = daemon::SayHello((*connection)->Bootstrap<rpc::Peer>(), "node-b")
                   .wait(io.waitScope);
  INFO(hello.status().ToString());
  REQUIRE(hello.ok());
  CHECK(hello->node == "node-a");
  CHECK(hello->protocol == 5);
  CHECK(Eventually([&] {
    return daemon.log().find("is node 'node-b' (certificate CN 'node-b')") != std::string::npos;
  }));

  auto stranger_tls = LoadTls(stranger, ca);
  auto refused = ConnectToPeer(*io.provider, stranger_tls.get(), address).wait(io.waitScope);
  REQUIRE_FALSE(refused.ok());
  INFO(refused.status().ToString());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Eventually([&] {
    return daemon.log().find("refused peer 127.0.0.1:") != std::string::npos;
  }));

  daemon.Stop();  // with node-b still connected
  CHECK(ReadFileOrEmpty(dir + "/state/peer.port").empty());
}

TEST_CASE("emberd refuses to start with listen but no tls, and warns about tls: off") {
  TempDir tmp;
  const std::string& dir = tmp.path();
  const std::string emberd = Runfile("daemon/emberd");
  ProcessOutput refused =
      RunToExit({emberd, "--socket", dir + "/e.sock", "--state-dir", dir + "/state", "--listen",
                 "127.0.0.1:0"},
                dir, std::chrono::seconds(20));
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--listen: key 'listen' (127.0.0.1:0) needs key 'tls'") !=
        std::string::npos);

  Daemon daemon(dir, WriteDaemonConfig(dir, "tls: off\n"));
  daemon.Start();
  CHECK(daemon.log().find("listening for peers") == std::string::npos);  // no listen, no endpoint
  daemon.Stop();
  Daemon plain(dir, {"--config", dir + "/emberd.yaml", "--listen", "127.0.0.1:0"});
  plain.Start();
  INFO(plain.log());
  CHECK(plain.log().find("tls: off: peer connections on 127.0.0.1:") != std::string::npos);
  CHECK(plain.log().find("(tls: off)") != std::string::npos);
  plain.Stop();
}

}  // namespace
}  // namespace ember::testing
