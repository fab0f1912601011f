#include "daemon/data/plugin/plugin_loader.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/temp_dir_testing.h"
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
      {"libbad_plugin_no_init.so",
       "not an Ember plugin: no symbol 'ember_plugin_init' nor 'ember_transform_init'"},
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

TEST_CASE("LoadPlugin loads a library of transforms, without a reader") {
  auto plugin = LoadPlugin(TestPluginPath("libember_color_plugin.so"));
  REQUIRE(plugin.ok());
  const Plugin& p = **plugin;
  CHECK_FALSE(p.has_reader());
  CHECK(p.format().empty());
  REQUIRE(p.transforms().size() == 2);
  CHECK(std::string(p.transforms()[0]->step_name) == "solarize");
  CHECK(std::string(p.transforms()[1]->step_name) == "grayscale");
  CHECK(p.transforms()[0]->abi_version == EMBER_TRANSFORM_ABI_VERSION);
  CHECK(p.FindTransform("grayscale") == p.transforms()[1]);
  CHECK(p.FindTransform("resize") == nullptr);
}

TEST_CASE("LoadPlugin loads a library that is both a reader and transforms") {
  auto plugin = LoadPlugin(TestPluginPath("libtest_csv_and_color.so"));
  REQUIRE(plugin.ok());
  CHECK((*plugin)->has_reader());
  CHECK((*plugin)->format() == "csv");
  CHECK((*plugin)->transforms().size() == 2);
  CHECK((*plugin)->FindTransform("solarize") != nullptr);

  auto reader_only = LoadPlugin(TestPluginPath("libember_csv_plugin.so"));
  REQUIRE(reader_only.ok());
  CHECK((*reader_only)->has_reader());
  CHECK((*reader_only)->transforms().empty());
}

TEST_CASE("LoadPlugin refuses broken transform tables, naming the file and the fault") {
  struct Case {
    const char* file;
    std::string fault;
  };
  const Case cases[] = {
      {"libbad_transform_abi.so", "transform 1: transform ABI version 2, this emberd speaks 1"},
      {"libbad_transform_size.so", "transform 1: struct_size " +
                                       std::to_string(sizeof(ember_transform_v1) - 8) +
                                       " is less than " +
                                       std::to_string(sizeof(ember_transform_v1))},
      {"libbad_transform_null_fn.so", "transform 1 ('bad'): function 'apply' is NULL"},
      {"libbad_transform_name.so",
       "transform 1: step_name 'Bad-Step' may only hold [a-z0-9_]"},
      {"libbad_transform_empty.so", "ember_transform_init() returned no transforms"},
      {"libbad_transform_duplicate.so", "two transforms named 'bad'"},
  };
  for (const Case& c : cases) {
    auto plugin = LoadPlugin(TestPluginPath(c.file));
    INFO(c.file);
    REQUIRE_FALSE(plugin.ok());
    INFO(plugin.status().message());
    CHECK(plugin.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(plugin.status().message(), "plugin /"));
    CHECK(Contains(plugin.status().message(), std::string(c.file) + ": " + c.fault));
  }
}

TEST_CASE("LoadPlugin refuses a file that is not a shared library") {
  const std::string path = WriteTempFile("not_a_library.so", "plain text\n");
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
  const std::string link = FreshTestDir("allowed") + "/link_to_csv.so";
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
  const std::string link = FreshTestDir("two_for_one_format") + "/second_csv.so";
  REQUIRE(symlink(csv.c_str(), link.c_str()) == 0);
  auto registry = PluginRegistry::Load({csv, link});
  REQUIRE_FALSE(registry.ok());
  CHECK(registry.status().code() == StatusCode::kAlreadyExists);
  CHECK(Contains(registry.status().message(), "format 'csv'"));
}

}  // namespace
}  // namespace ember::daemon
