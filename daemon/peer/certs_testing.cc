#include "daemon/peer/certs_testing.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace ember::daemon {

namespace {

constexpr const char kOpenssl[] = "/usr/bin/openssl";
constexpr const char kNewEcKey[] = " -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";

std::string Quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs openssl with `args` (already quoted), its output in <dir>/openssl.log.
void Openssl(const std::string& dir, const std::string& args) {
  const std::string log = dir + "/openssl.log";
  const std::string command =
      std::string(kOpenssl) + " " + args + " >" + Quoted(log) + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(command << "\n" << output);
  REQUIRE(status == 0);
}

}  // namespace

TestKeypair MakeTestCa(const std::string& dir, const std::string& name) {
  TestKeypair ca{dir + "/" + name + ".pem", dir + "/" + name + ".key"};
  Openssl(dir, "req -x509" + std::string(kNewEcKey) + " -keyout " + Quoted(ca.key_path) +
                   " -out " + Quoted(ca.cert_path) + " -days 2 -subj " + Quoted("/CN=" + name));
  return ca;
}

TestKeypair MakeTestNodeCert(const std::string& dir, const TestKeypair& ca,
                             const std::string& common_name, const std::string& sans) {
  TestKeypair node{dir + "/" + common_name + ".pem", dir + "/" + common_name + ".key"};
  const std::string csr = dir + "/" + common_name + ".csr";
  const std::string extensions = dir + "/" + common_name + ".ext";
  Openssl(dir, "req" + std::string(kNewEcKey) + " -keyout " + Quoted(node.key_path) + " -out " +
                   Quoted(csr) + " -subj " + Quoted("/CN=" + common_name));
  {
    std::ofstream out(extensions);
    if (!sans.empty()) out << "subjectAltName=" << sans << "\n";
    out << "extendedKeyUsage=serverAuth,clientAuth\n";
  }
  Openssl(dir, "x509 -req -in " + Quoted(csr) + " -CA " + Quoted(ca.cert_path) + " -CAkey " +
                   Quoted(ca.key_path) + " -CAcreateserial -days 2 -extfile " +
                   Quoted(extensions) + " -out " + Quoted(node.cert_path));
  return node;
}

}  // namespace ember::daemon
