#include "daemon/data/plugin/plugin_registry.h"

#include <catch2/catch.hpp>

#include "daemon/data/image/pipeline.h"
#include "daemon/data/plugin/plugin_testing.h"

namespace ember::daemon {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("PluginRegistry maps step names to the plugins adding them") {
  const std::string color = TestPluginPath("libember_color_plugin.so");
  const std::string csv = TestPluginPath("libember_csv_plugin.so");
  auto registry = PluginRegistry::Load({color, csv});
  REQUIRE(registry.ok());
  const PluginRegistry& r = **registry;
  CHECK(r.Transforms() == std::vector<std::string>{"grayscale", "solarize"});
  CHECK(r.Formats() == std::vector<std::string>{"csv"});  // none from the color plugin
  REQUIRE(r.FindTransform("solarize") != nullptr);
  CHECK(Contains(r.FindTransform("solarize")->path(), "/libember_color_plugin.so"));
  CHECK(r.FindTransform("grayscale") == r.FindTransform("solarize"));
  CHECK(r.FindTransform("resize") == nullptr);  // built-in, not a plugin's
  CHECK(r.FindTransform("csv") == nullptr);
  CHECK(r.Find("solarize") == nullptr);

  auto empty = PluginRegistry::Load({});
  REQUIRE(empty.ok());
  CHECK((*empty)->Transforms().empty());
}

TEST_CASE("PluginRegistry takes both the format and the steps of one library") {
  auto registry = PluginRegistry::Load({TestPluginPath("libtest_csv_and_color.so")});
  REQUIRE(registry.ok());
  CHECK((*registry)->Formats() == std::vector<std::string>{"csv"});
  CHECK((*registry)->Transforms() == std::vector<std::string>{"grayscale", "solarize"});
  CHECK((*registry)->Find("csv") == (*registry)->FindTransform("solarize"));
}

TEST_CASE("PluginRegistry refuses a plugin step named like a built-in step") {
  auto registry = PluginRegistry::Load({TestPluginPath("libtest_transform_resize.so")});
  REQUIRE_FALSE(registry.ok());
  CHECK(registry.status().code() == StatusCode::kAlreadyExists);
  CHECK(Contains(registry.status().message(),
                 "libtest_transform_resize.so: step 'resize' is a built-in pipeline step"));
}

TEST_CASE("PluginRegistry refuses two plugins adding one step, or reading one format") {
  auto steps = PluginRegistry::Load({TestPluginPath("libember_color_plugin.so"),
                                     TestPluginPath("libtest_transform_solarize.so")});
  REQUIRE_FALSE(steps.ok());
  CHECK(steps.status().code() == StatusCode::kAlreadyExists);
  INFO(steps.status().message());
  CHECK(Contains(steps.status().message(), "/libember_color_plugin.so and /"));
  CHECK(Contains(steps.status().message(),
                 "/libtest_transform_solarize.so both add pipeline step 'solarize'"));

  auto formats = PluginRegistry::Load({TestPluginPath("libember_csv_plugin.so"),
                                       TestPluginPath("libtest_csv_and_color.so")});
  REQUIRE_FALSE(formats.ok());
  CHECK(formats.status().code() == StatusCode::kAlreadyExists);
  CHECK(Contains(formats.status().message(), "/libember_csv_plugin.so and /"));
  CHECK(Contains(formats.status().message(),
                 "/libtest_csv_and_color.so both read format 'csv'"));
}

TEST_CASE("PluginRegistry fails on a transform plugin that does not load, naming it") {
  auto registry = PluginRegistry::Load({TestPluginPath("libember_color_plugin.so"),
                                        TestPluginPath("libbad_transform_null_fn.so")});
  REQUIRE_FALSE(registry.ok());
  CHECK(registry.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(registry.status().message(), "libbad_transform_null_fn.so"));
}

// kBuiltinImageSteps must list exactly the image pipeline's steps.
TEST_CASE("kBuiltinImageSteps are the image pipeline's built-in steps") {
  std::string known;
  for (const char* step : kBuiltinImageSteps) {
    known += (known.empty() ? "" : ", ") + std::string(step);
    auto parsed = ImagePipeline::Parse(std::string("steps:\n  - ") + step + ": {}\n");
    INFO(step);
    // Most need settings, but every one must be known.
    CHECK((parsed.ok() || !Contains(parsed.status().message(), "unknown step")));
  }
  auto unknown = ImagePipeline::Parse("steps:\n  - no_such_step: {}\n");
  REQUIRE_FALSE(unknown.ok());
  INFO(unknown.status().message());
  CHECK(Contains(unknown.status().message(), "(known: " + known + ")"));
}

}  // namespace
}  // namespace ember::daemon
