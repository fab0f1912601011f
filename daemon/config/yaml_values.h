// Small pieces for strict YAML parsing, shared by the daemon's config and the formats'
// pipeline options.
#ifndef EMBER_DAEMON_CONFIG_YAML_VALUES_H_
#define EMBER_DAEMON_CONFIG_YAML_VALUES_H_

#include <cstdint>
#include <string>

#include <yaml-cpp/yaml.h>

namespace ember::daemon {

// Parses a decimal integer of digits only ("+1", "-1", "0x10", " 1" and overflow are
// refused). Returns false without touching *value on failure.
bool ParseDecimal(const std::string& text, uint64_t* value);

// What a node is, for "expected X, got Y" messages: "'text'" for a scalar, else "a list",
// "a map", "nothing".
std::string DescribeNode(const YAML::Node& node);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_CONFIG_YAML_VALUES_H_
