#include "common/strict_yaml.h"

#include <cctype>
#include <cmath>
#include <set>

namespace ember {

namespace {

// Longest text of a list or map DescribeYaml shows.
constexpr size_t kMaxDescribed = 120;

std::string Joined(std::initializer_list<const char*> names, const char* last_separator) {
  std::string text;
  size_t i = 0;
  for (const char* name : names) {
    if (i > 0) text += i + 1 == names.size() ? last_separator : ", ";
    text += name;
    ++i;
  }
  return text;
}

// Node::IsScalar and IsMap throw for a missing key; these say false.
bool IsScalar(const YAML::Node& node) { return node.IsDefined() && node.IsScalar(); }
bool IsMap(const YAML::Node& node) { return node.IsDefined() && node.IsMap(); }

}  // namespace

bool ParseDecimal(const std::string& text, uint64_t* value) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *value = v;
  return true;
}

std::string YamlLocation(const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return "";
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

std::string DescribeYaml(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  std::string kind = node.IsMap() ? "a map" : "a list";
  YAML::Emitter out;
  out << YAML::Flow << node;
  if (!out.good()) return kind;
  std::string text = out.c_str();
  if (text.size() > kMaxDescribed) text = text.substr(0, kMaxDescribed) + "...";
  return kind + " " + text;
}

Status StrictYaml::Error(const YAML::Mark& at, const std::string& what) const {
  const std::string where = YamlLocation(at);
  return Status(code_, source_ + ": " + (where.empty() ? "" : where + ": ") + what);
}

Status StrictYaml::Error(const YAML::Node& at, const std::string& what) const {
  return Error(at.IsDefined() ? at.Mark() : YAML::Mark::null_mark(), what);
}

Status StrictYaml::Error(const std::string& what) const {
  return Error(YAML::Mark::null_mark(), what);
}

Result<YAML::Node> StrictYaml::Load(const std::string& text) const {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error(e.mark, "not valid YAML: " + e.msg);
  } catch (const std::exception& e) {
    return Error(std::string("not valid YAML: ") + e.what());
  }
}

Status StrictYaml::CheckKeys(const YAML::Node& map, const std::string& what,
                             std::initializer_list<const char*> known) const {
  const std::string prefix = what.empty() ? "" : what + ": ";
  if (!IsMap(map)) return Expected(map, what.empty() ? "the document" : what, "a map");
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->first.IsScalar()) {
      return Error(it->first, prefix + "expected key names, got " + DescribeYaml(it->first));
    }
    const std::string key = it->first.Scalar();
    bool found = false;
    for (const char* name : known) found = found || key == name;
    if (!found) {
      return Error(it->first, prefix + "unknown key '" + key + "' (known: " +
                                  Joined(known, ", ") + ")");
    }
    if (!seen.insert(key).second) {
      return Error(it->first, prefix + "key '" + key + "' is given more than once");
    }
  }
  return Status::Ok();
}

Status StrictYaml::Expected(const YAML::Node& node, const std::string& what,
                            const std::string& expected) const {
  return Error(node, what + " must be " + expected + ", got " + DescribeYaml(node));
}

Result<std::string> StrictYaml::String(const YAML::Node& node, const std::string& what,
                                       const std::string& expected) const {
  if (!IsScalar(node) || node.Scalar().empty()) return Expected(node, what, expected);
  return node.Scalar();
}

Result<uint64_t> StrictYaml::Unsigned(const YAML::Node& node, const std::string& what,
                                      uint64_t min, uint64_t max) const {
  uint64_t value = 0;
  if (!IsScalar(node) || !ParseDecimal(node.Scalar(), &value) || value < min || value > max) {
    std::string expected = "a whole number";
    if (max != UINT64_MAX) {
      expected += " in " + std::to_string(min) + ".." + std::to_string(max);
    } else if (min > 0) {
      expected += " above " + std::to_string(min - 1);
    }
    return Expected(node, what, expected);
  }
  return value;
}

Result<double> StrictYaml::Number(const YAML::Node& node, const std::string& what) const {
  double value = 0;
  bool ok = IsScalar(node);
  try {
    if (ok) value = node.as<double>();
  } catch (const YAML::Exception&) {
    ok = false;
  }
  if (!ok) return Expected(node, what, "a number");
  if (!std::isfinite(value)) return Expected(node, what, "finite");
  return value;
}

Result<size_t> StrictYaml::OneOf(const YAML::Node& node, const std::string& what,
                                 std::initializer_list<const char*> names) const {
  if (IsScalar(node)) {
    size_t index = 0;
    for (const char* name : names) {
      if (node.Scalar() == name) return index;
      ++index;
    }
  }
  const std::string choices = names.size() <= 2 ? Joined(names, " or ")
                                                : "one of " + Joined(names, ", ");
  return Expected(node, what, choices);
}

}  // namespace ember
