#include "daemon/peer/host_port.h"

#include <arpa/inet.h>

#include <cctype>

#include "common/strict_yaml.h"

namespace ember::daemon {

namespace {

bool IsIpv4(const std::string& host) {
  in_addr addr;
  return inet_pton(AF_INET, host.c_str(), &addr) == 1;
}

bool IsIpv6(const std::string& host) {
  in6_addr addr;
  return inet_pton(AF_INET6, host.c_str(), &addr) == 1;
}

bool IsName(const std::string& host) {
  for (const char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') {
      return false;
    }
  }
  return !host.empty() && host.front() != '-' && host.front() != '.';
}

}  // namespace

std::string HostPort::ToString() const {
  const std::string port_text = std::to_string(port);
  return IsIpv6(host) ? "[" + host + "]:" + port_text : host + ":" + port_text;
}

bool HostPort::HostIsAddress() const { return IsIpv4(host) || IsIpv6(host); }

Result<HostPort> ParseHostPort(const std::string& text) {
  auto bad = [&text](const std::string& why) {
    return InvalidArgument("expected HOST:PORT (e.g. 10.0.0.5:7000, [::1]:7000 or node0:7000)" +
                           why + ", got '" + text + "'");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return bad("");
  HostPort result;
  result.host = text.substr(0, colon);
  uint64_t port = 0;
  if (!ParseDecimal(text.substr(colon + 1), &port) || port > 65535) {
    return bad(": the port must be a whole number in 0..65535");
  }
  result.port = static_cast<uint16_t>(port);
  if (result.host.size() >= 2 && result.host.front() == '[' && result.host.back() == ']') {
    result.host = result.host.substr(1, result.host.size() - 2);
    if (!IsIpv6(result.host)) return bad(": brackets hold an IPv6 address");
    return result;
  }
  if (IsIpv6(result.host)) return bad(": an IPv6 address goes in brackets");
  if (!IsIpv4(result.host) && !IsName(result.host)) {
    return bad(": the host must be an IP address or a name");
  }
  return result;
}

}  // namespace ember::daemon
