// Strict reading of YAML documents (emberd's config, the catalog file, dataset
// pipelines): unknown keys, repeated keys and values of the wrong type are errors, and
// every error says where it is and what was found:
//   "emberd.yaml: line 3, column 17: key 'decode_threads' must be a whole number in
//    0..1024, got 'many'"
// yaml-cpp's own exceptions (syntax errors, conversions) are caught here and never
// reach the caller.
#ifndef EMBER_COMMON_STRICT_YAML_H_
#define EMBER_COMMON_STRICT_YAML_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>
#include <utility>

#include "ember/status.h"

namespace ember {

// Parses a decimal integer of digits only ("+1", "-1", "0x10", " 1" and overflow are
// refused). Returns false without touching *value on failure.
bool ParseDecimal(const std::string& text, uint64_t* value);

// "line 3, column 7" (counted from 1) for a mark; "" for the null mark (a node built in
// code rather than parsed).
std::string YamlLocation(const YAML::Mark& mark);

// What a node is, for "got X" in messages: "'text'" for a scalar, "nothing" for null (or
// a missing key), "a list [1, 2]" and "a map {a: 1}" (shortened when long).
std::string DescribeYaml(const YAML::Node& node);

// The errors of one YAML document. Every error has the code given at construction and
// reads "<source>: line N, column M: <what>", without the location where there is none.
// Immutable and thread-safe.
class StrictYaml {
 public:
  explicit StrictYaml(std::string source, StatusCode code = StatusCode::kInvalidArgument)
      : source_(std::move(source)), code_(code) {}

  const std::string& source() const { return source_; }

  // Parses `text` and returns read(root), a Status or Result<T>. A syntax error is
  // "...: not valid YAML: <yaml-cpp's message>"; a yaml-cpp exception thrown by `read`
  // becomes an error at its mark.
  template <typename Read>
  auto Parse(const std::string& text, Read&& read) const
      -> decltype(read(std::declval<const YAML::Node&>()));

  Status Error(const YAML::Node& at, const std::string& what) const;
  Status Error(const YAML::Mark& at, const std::string& what) const;
  Status Error(const std::string& what) const;  // no location

  // Fails unless every key of the map `map` is a scalar named in `known` and given once:
  //   "<what>: unknown key 'k' (known: a, b)", "<what>: key 'k' is given more than once"
  // at the key (without "<what>: " when `what` is empty).
  Status CheckKeys(const YAML::Node& map, const std::string& what,
                   std::initializer_list<const char*> known) const;

  // Typed reads of a scalar `what` names. Each fails at the node with
  // "<what> must be <expected>, got <DescribeYaml(node)>".
  //   String    a non-empty scalar; `expected` says what it holds ("a path").
  //   Unsigned  digits only (ParseDecimal), in min..max: "a whole number in 1..65535"
  //             ("a whole number", "a whole number above 0" when max is UINT64_MAX).
  //   Number    a finite number.
  //   OneOf     one of `names`, returning its index: "uint8 or float32",
  //             "one of trace, debug, info".
  Result<std::string> String(const YAML::Node& node, const std::string& what,
                             const std::string& expected = "a string") const;
  Result<uint64_t> Unsigned(const YAML::Node& node, const std::string& what, uint64_t min,
                            uint64_t max) const;
  Result<double> Number(const YAML::Node& node, const std::string& what) const;
  Result<size_t> OneOf(const YAML::Node& node, const std::string& what,
                       std::initializer_list<const char*> names) const;

 private:
  Status Expected(const YAML::Node& node, const std::string& what,
                  const std::string& expected) const;
  Result<YAML::Node> Load(const std::string& text) const;

  std::string source_;
  StatusCode code_;
};

template <typename Read>
auto StrictYaml::Parse(const std::string& text, Read&& read) const
    -> decltype(read(std::declval<const YAML::Node&>())) {
  Result<YAML::Node> root = Load(text);
  if (!root.ok()) return root.status();
  try {
    return read(*root);
  } catch (const YAML::Exception& e) {
    return Error(e.mark, e.msg);
  } catch (const std::exception& e) {
    return Error(e.what());
  }
}

}  // namespace ember

#endif  // EMBER_COMMON_STRICT_YAML_H_
