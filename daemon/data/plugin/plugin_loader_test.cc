#include "daemon/data/plugin/plugin_loader.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/plugin/plugin_testing.h"

namespace ember::daemon {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("LoadPlugin loads the csv example and checks its table") {
  auto plugin = LoadPlugin(TestPluginPath("libember_csv_plugin.so"));
  REQUIRE(plugin.ok());
  CHECK((*plugin)->format() == "csv");
  CHECK((*plugin)->table().abi_version == EMBER_PLUGIN_ABI_VERSION);
  CHECK((*plugin)->path()[0] == '/');
}

TEST_CASE("LoadPlugin refuses broken libraries, naming the file and the fault") {
  struct Case {
    const char* file;
    const char* fault;
  };
  const Case cases[] = {
      {"libbad_plugin_abi.so", "ABI version 2, this emberd speaks 1"},
      {"libbad_plugin_null_fn.so", "function 'read_sample' is NULL"},
      {"libbad_plugin_no_init.so", "no symbol 'ember_plugin_init'"},
  };
  for (const Case& c : cases) {
    auto plugin = LoadPlugin(TestPluginPath(c.file));
    INFO(c.file);
    REQUIRE_FALSE(plugin.ok());
    CHECK(plugin.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(plugin.status().message(), c.file));
    CHECK(Contains(plugin.status().message(), c.fault));
  }
}

TEST_CASE("LoadPlugin refuses a file that is not a shared library") {
  const std::string path = WriteTestFile("not_a_library.so", "plain text\n");
  auto plugin = LoadPlugin(path);
  REQUIRE_FALSE(plugin.ok());
  CHECK(plugin.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(plugin.status().message(), "not_a_library.so: cannot load"));

  auto missing = LoadPlugin(path + ".missing");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
}

TEST_CASE("LoadAllowedPlugin loads only listed paths, whatever the spelling") {
  const std::string csv = TestPluginPath("libember_csv_plugin.so");
  const std::string bad = TestPluginPath("libbad_plugin_abi.so");

  auto refused = LoadAllowedPlugin(csv, {bad});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(refused.status().message(), "libember_csv_plugin.so' is not listed"));

  // A symlink to a listed file is the same file; a symlink elsewhere is not listed.
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string link = std::string(tmp ? tmp : "/tmp") + "/link_to_csv.so";
  unlink(link.c_str());
  REQUIRE(symlink(csv.c_str(), link.c_str()) == 0);
  auto via_link = LoadAllowedPlugin(link, {csv});
  REQUIRE(via_link.ok());
  CHECK((*via_link)->format() == "csv");
  CHECK_FALSE(LoadAllowedPlugin(csv, {link + ".other"}).ok());

  auto listed = LoadAllowedPlugin(csv, {bad, csv});
  REQUIRE(listed.ok());
}

TEST_CASE("PluginRegistry maps formats to the listed plugins") {
  const std::string csv = TestPluginPath("libember_csv_plugin.so");
  auto registry = PluginRegistry::Load({csv});
  REQUIRE(registry.ok());
  CHECK((*registry)->Formats() == std::vector<std::string>{"csv"});
  REQUIRE((*registry)->Find("csv") != nullptr);
  CHECK((*registry)->Find("csv")->format() == "csv");
  CHECK((*registry)->Find("idx") == nullptr);

  auto empty = PluginRegistry::Load({});
  REQUIRE(empty.ok());
  CHECK((*empty)->Formats().empty());
}

TEST_CASE("PluginRegistry fails on a plugin that does not load, naming it") {
  auto registry = PluginRegistry::Load(
      {TestPluginPath("libember_csv_plugin.so"), TestPluginPath("libbad_plugin_null_fn.so")});
  REQUIRE_FALSE(registry.ok());
  CHECK(Contains(registry.status().message(), "libbad_plugin_null_fn.so"));

  auto relative = PluginRegistry::Load({"plugins/libember_csv_plugin.so"});
  REQUIRE_FALSE(relative.ok());
  CHECK(relative.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(relative.status().message(), "must be absolute"));
}

TEST_CASE("PluginRegistry refuses two plugins for one format") {
  const std::string csv = TestPluginPath("libember_csv_plugin.so");
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string link = std::string(tmp ? tmp : "/tmp") + "/second_csv.so";
  unlink(link.c_str());
  REQUIRE(symlink(csv.c_str(), link.c_str()) == 0);
  auto registry = PluginRegistry::Load({csv, link});
  REQUIRE_FALSE(registry.ok());
  CHECK(registry.status().code() == StatusCode::kAlreadyExists);
  CHECK(Contains(registry.status().message(), "format 'csv'"));
}

}  // namespace
}  // namespace ember::daemon
