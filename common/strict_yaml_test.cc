#include "common/strict_yaml.h"

#include <stdexcept>

#include <catch2/catch.hpp>

namespace ember {
namespace {

// The message of reading `text` with `read`, which must fail.
template <typename Read>
std::string ErrorOf(const StrictYaml& yaml, const std::string& text, Read read) {
  Status status = yaml.Parse(text, read);
  REQUIRE_FALSE(status.ok());
  return status.message();
}

TEST_CASE("ParseDecimal takes digits only") {
  uint64_t value = 7;
  CHECK(ParseDecimal("0", &value));
  CHECK(value == 0);
  CHECK(ParseDecimal("18446744073709551615", &value));
  CHECK(value == UINT64_MAX);
  for (const char* bad : {"", "+1", "-1", "0x10", " 1", "1 ", "1.5", "18446744073709551616",
                          "123456789012345678901"}) {
    INFO(bad);
    value = 7;
    CHECK_FALSE(ParseDecimal(bad, &value));
    CHECK(value == 7);
  }
}

TEST_CASE("DescribeYaml says what a node is") {
  const YAML::Node node = YAML::Load("{s: text, n: ~, l: [1, 2], m: {a: 1}}");
  CHECK(DescribeYaml(node["s"]) == "'text'");
  CHECK(DescribeYaml(node["n"]) == "nothing");
  CHECK(DescribeYaml(node["missing"]) == "nothing");
  CHECK(DescribeYaml(node["l"]) == "a list [1, 2]");
  CHECK(DescribeYaml(node["m"]) == "a map {a: 1}");
  const std::string long_list = DescribeYaml(YAML::Load("[" + std::string(300, '1') + "]"));
  CHECK(long_list.size() < 140);
  CHECK(long_list.substr(long_list.size() - 3) == "...");
}

TEST_CASE("errors name the source, the line and the column") {
  const StrictYaml yaml("test.yaml");
  const YAML::Node root = YAML::Load("a: 1\nb:\n  c: x\n");
  CHECK(yaml.Error(root["b"]["c"], "bad").message() == "test.yaml: line 3, column 6: bad");
  CHECK(yaml.Error(root["nope"], "bad").message() == "test.yaml: bad");
  CHECK(yaml.Error(YAML::Node(YAML::NodeType::Map), "bad").message() == "test.yaml: bad");
  CHECK(yaml.Error("bad").code() == StatusCode::kInvalidArgument);
  CHECK(StrictYaml("f", StatusCode::kDataLoss).Error("bad").code() == StatusCode::kDataLoss);
  CHECK(YamlLocation(YAML::Mark::null_mark()).empty());
}

TEST_CASE("Parse reports syntax errors and exceptions thrown while reading") {
  const StrictYaml yaml("test.yaml");
  auto nothing = [](const YAML::Node&) { return Status::Ok(); };
  CHECK_THAT(ErrorOf(yaml, "a: [1, 2\n", nothing),
             Catch::StartsWith("test.yaml: line ") && Catch::Contains(", column ") &&
                 Catch::Contains(": not valid YAML: "));
  CHECK_THAT(ErrorOf(yaml, "a: x\n",
                     [](const YAML::Node& root) {
                       root["a"].as<int>();
                       return Status::Ok();
                     }),
             Catch::StartsWith("test.yaml: line 1, column 4: "));
  CHECK(ErrorOf(yaml, "a: 1\n", [](const YAML::Node&) -> Status {
          throw std::runtime_error("boom");
        }) == "test.yaml: boom");
  Result<int> value = yaml.Parse("a: 3\n", [](const YAML::Node& root) -> Result<int> {
    return root["a"].as<int>();
  });
  REQUIRE(value.ok());
  CHECK(*value == 3);
}

TEST_CASE("CheckKeys refuses unknown, repeated and non-scalar keys") {
  const StrictYaml yaml("p");
  auto check = [&](const char* what) {
    return [&yaml, what](const YAML::Node& root) {
      return yaml.CheckKeys(root, what, {"seq_len", "dtype"});
    };
  };
  CHECK(yaml.Parse("{seq_len: 1, dtype: x}", check("tokens")).ok());
  CHECK(ErrorOf(yaml, "seq_len: 1\nseqlen: 2\n", check("tokens")) ==
        "p: line 2, column 1: tokens: unknown key 'seqlen' (known: seq_len, dtype)");
  CHECK(ErrorOf(yaml, "seq_len: 1\nseq_len: 2\n", check("")) ==
        "p: line 2, column 1: key 'seq_len' is given more than once");
  CHECK(ErrorOf(yaml, "? [a]\n: 1\n", check("")) ==
        "p: line 1, column 3: expected key names, got a list [a]");
  CHECK(ErrorOf(yaml, "[1]", check("tokens")) == "p: line 1, column 1: tokens must be a map, got a list [1]");
}

TEST_CASE("typed reads name the field and the value") {
  const StrictYaml yaml("cfg");
  const YAML::Node root = YAML::Load("n: 12\nword: many\nempty: ''\nlist: [1]\nf: 0.25\ninf: .inf\n");
  CHECK(*yaml.Unsigned(root["n"], "key 'n'", 0, 100) == 12);
  CHECK(yaml.Unsigned(root["n"], "key 'n'", 0, 10).status().message() ==
        "cfg: line 1, column 4: key 'n' must be a whole number in 0..10, got '12'");
  CHECK(yaml.Unsigned(root["word"], "n", 0, UINT64_MAX).status().message() ==
        "cfg: line 2, column 7: n must be a whole number, got 'many'");
  CHECK(yaml.Unsigned(root["list"], "n", 1, UINT64_MAX).status().message() ==
        "cfg: line 4, column 7: n must be a whole number above 0, got a list [1]");
  CHECK(yaml.Unsigned(root["missing"], "n", 1, 2).status().message() ==
        "cfg: n must be a whole number in 1..2, got nothing");

  CHECK(*yaml.String(root["word"], "w") == "many");
  CHECK(yaml.String(root["empty"], "key 'e'", "a path").status().message() ==
        "cfg: line 3, column 8: key 'e' must be a path, got ''");

  CHECK(*yaml.Number(root["f"], "f") == 0.25);
  CHECK(yaml.Number(root["word"], "f").status().message() ==
        "cfg: line 2, column 7: f must be a number, got 'many'");
  CHECK(yaml.Number(root["inf"], "f").status().message() ==
        "cfg: line 6, column 6: f must be finite, got '.inf'");

  CHECK(*yaml.OneOf(root["word"], "w", {"few", "many"}) == 1);
  CHECK(yaml.OneOf(root["word"], "w", {"a", "b"}).status().message() ==
        "cfg: line 2, column 7: w must be a or b, got 'many'");
  CHECK(yaml.OneOf(root["list"], "w", {"a", "b", "c"}).status().message() ==
        "cfg: line 4, column 7: w must be one of a, b, c, got a list [1]");
}

}  // namespace
}  // namespace ember
