#include "daemon/peer/host_port.h"

#include <catch2/catch.hpp>

namespace ember::daemon {
namespace {

TEST_CASE("ParseHostPort reads IPv4, bracketed IPv6 and names") {
  struct Case {
    const char* text;
    const char* host;
    uint16_t port;
    bool address;
    const char* canonical;
  };
  for (const Case& c : {Case{"127.0.0.1:0", "127.0.0.1", 0, true, "127.0.0.1:0"},
                        Case{"10.0.0.5:7000", "10.0.0.5", 7000, true, "10.0.0.5:7000"},
                        Case{"[::1]:65535", "::1", 65535, true, "[::1]:65535"},
                        Case{"[fe80::1:2]:80", "fe80::1:2", 80, true, "[fe80::1:2]:80"},
                        Case{"node0:7000", "node0", 7000, false, "node0:7000"},
                        Case{"n-1.example.org:1", "n-1.example.org", 1, false,
                             "n-1.example.org:1"}}) {
    INFO(c.text);
    Result<HostPort> parsed = ParseHostPort(c.text);
    INFO(parsed.status().ToString());
    REQUIRE(parsed.ok());
    CHECK(parsed->host == c.host);
    CHECK(parsed->port == c.port);
    CHECK(parsed->HostIsAddress() == c.address);
    CHECK(parsed->ToString() == c.canonical);
  }
}

TEST_CASE("ParseHostPort refuses what is not HOST:PORT, quoting it") {
  for (const char* text : {"", "7000", "node0", ":7000", "node0:", "node0:65536", "node0:-1",
                           "node0:+1", "node0:0x10", "::1:7000", "[::1]", "[node0]:7000",
                           "[1.2.3.4]:1", "no de:1", "-x:1", "a/b:1"}) {
    INFO(text);
    Result<HostPort> parsed = ParseHostPort(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(parsed.status().message(),
               Catch::StartsWith("expected HOST:PORT (e.g. 10.0.0.5:7000, [::1]:7000") &&
                   Catch::EndsWith(std::string("got '") + text + "'"));
  }
  CHECK_THAT(ParseHostPort("node0:70000").status().message(), Catch::Contains("0..65535"));
  CHECK_THAT(ParseHostPort("::1:7000").status().message(), Catch::Contains("in brackets"));
}

}  // namespace
}  // namespace ember::daemon
