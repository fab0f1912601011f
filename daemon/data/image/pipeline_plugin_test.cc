// Transform-plugin steps inside an image pipeline: parsing against a registry of loaded
// plugins (the example libember_color_plugin.so), where they may stand, what they do to
// the output, their randomness, and their failures.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daemon/data/image/image_testing.h"
#include "daemon/data/image/pipeline.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/plugin/plugin_testing.h"
#include "ember/status.h"

namespace ember::daemon {
namespace {

std::unique_ptr<PluginRegistry> Registry(const std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back(TestPluginPath(name));
  auto registry = PluginRegistry::Load(paths);
  REQUIRE(registry.ok());
  return std::move(registry).value();
}

ImagePipeline MustParse(const std::string& yaml, const PluginRegistry* plugins) {
  auto pipeline = ImagePipeline::Parse(yaml, plugins);
  INFO(yaml << " -> " << pipeline.status().ToString());
  REQUIRE(pipeline.ok());
  return std::move(pipeline).value();
}

std::string ParseError(const std::string& yaml, const PluginRegistry* plugins) {
  auto pipeline = ImagePipeline::Parse(yaml, plugins);
  REQUIRE_FALSE(pipeline.ok());
  return pipeline.status().ToString();
}

// Runs `pipeline` on a lossless 32x24 gradient image; the output bytes.
std::vector<uint8_t> RunOn(const ImagePipeline& pipeline, uint64_t seed, uint64_t epoch,
                           uint64_t id, Status* status = nullptr) {
  static const std::string png = EncodePng(GradientImage(32, 24));
  std::vector<uint8_t> out(pipeline.OutputBytes());
  Status result = pipeline.Run("gradient.png", reinterpret_cast<const uint8_t*>(png.data()),
                               png.size(), seed, epoch, id, out.data());
  if (status != nullptr) {
    *status = result;
  } else {
    INFO(result.ToString());
    REQUIRE(result.ok());
  }
  return out;
}

TEST_CASE("a plugin step transforms the rendered image before dtype and layout") {
  auto registry = Registry({"libember_color_plugin.so"});
  const std::string base = "steps: [{center_crop: {size: [16, 20]}}, {horizontal_flip: {p: 1}}";
  const ImagePipeline plain = MustParse(base + "]", registry.get());
  // threshold 0 inverts every value.
  const ImagePipeline inverted =
      MustParse(base + ", {solarize: {threshold: 0}}]", registry.get());
  REQUIRE(inverted.shape() == plain.shape());
  const std::vector<uint8_t> a = RunOn(plain, 1, 0, 7);
  const std::vector<uint8_t> b = RunOn(inverted, 1, 0, 7);
  REQUIRE(a.size() == 3u * 16 * 20);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(int(b[i]) == 255 - int(a[i]));

  SECTION("float32 with normalize after the plugin step") {
    const std::string tail =
        "], output: {dtype: float32, layout: HWC}}";
    const ImagePipeline normalized = MustParse(
        "{steps: [{center_crop: {size: [16, 20]}}, {horizontal_flip: {p: 1}}, "
        "{solarize: {threshold: 0}}, {normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.5, 1]}}" +
            tail,
        registry.get());
    const ImagePipeline hwc = MustParse(
        "{steps: [{center_crop: {size: [16, 20]}}, {horizontal_flip: {p: 1}}], "
        "output: {layout: HWC}}",
        registry.get());
    const std::vector<uint8_t> pixels = RunOn(hwc, 1, 0, 7);
    const std::vector<uint8_t> raw = RunOn(normalized, 1, 0, 7);
    std::vector<float> values(pixels.size());
    std::memcpy(values.data(), raw.data(), raw.size());
    const float std_dev[3] = {0.25f, 0.5f, 1.0f};
    for (size_t i = 0; i < pixels.size(); ++i) {
      const float expected = ((255 - pixels[i]) / 255.0f - 0.5f) / std_dev[i % 3];
      REQUIRE(values[i] == Approx(expected).margin(1e-5));
    }
  }
}

TEST_CASE("a plugin step's randomness comes from (seed, epoch, id, step)") {
  auto registry = Registry({"libember_color_plugin.so"});
  const ImagePipeline half = MustParse(
      "steps: [{center_crop: {size: 8}}, {solarize: {threshold: 0, p: 0.5}}]", registry.get());
  const ImagePipeline never = MustParse("steps: [{center_crop: {size: 8}}]", registry.get());
  const std::vector<uint8_t> original = RunOn(never, 3, 0, 0);
  int applied = 0, epochs_differ = 0;
  for (uint64_t id = 0; id < 64; ++id) {
    const std::vector<uint8_t> out = RunOn(half, 3, 0, id);
    REQUIRE(RunOn(half, 3, 0, id) == out);  // reproducible
    if (out != original) ++applied;
    if (RunOn(half, 3, 1, id) != out) ++epochs_differ;
  }
  // p = 0.5 over 64 samples: both outcomes, and other epochs decide differently.
  CHECK(applied > 10);
  CHECK(applied < 54);
  CHECK(epochs_differ > 10);
}

TEST_CASE("plugin steps are checked when the pipeline is parsed") {
  auto registry = Registry({"libember_color_plugin.so"});

  SECTION("unknown without the plugin, and the known list names plugin steps") {
    CHECK_THAT(ParseError("steps: [{center_crop: {size: 8}}, {solarize: {}}]", nullptr),
               Catch::Contains("unknown step 'solarize'"));
    CHECK_THAT(ParseError("steps: [{center_crop: {size: 8}}, {posterize: {}}]", registry.get()),
               Catch::Contains("normalize, grayscale, solarize)"));
  }
  SECTION("the plugin refuses a setting: line, column, step, plugin file, key and value") {
    const std::string error = ParseError(
        "steps:\n  - center_crop: {size: 8}\n  - solarize: {threshold: 300}\n", registry.get());
    CHECK_THAT(error, Catch::Contains("pipeline: line 3, column 5"));
    CHECK_THAT(error, Catch::Contains("step 'solarize' (plugin /"));
    CHECK_THAT(error, Catch::Contains("/libember_color_plugin.so): "));
    CHECK_THAT(error, Catch::Contains("threshold"));
    CHECK_THAT(error, Catch::Contains("'300'"));
  }
  SECTION("settings must be single values") {
    CHECK_THAT(ParseError("steps: [{center_crop: {size: 8}}, {solarize: {threshold: [1, 2]}}]",
                          registry.get()),
               Catch::Contains("step 'solarize': threshold: a plugin step's settings must be "
                               "single values"));
  }
  SECTION("plugin steps come after every crop, resize and flip") {
    CHECK_THAT(ParseError("steps: [{solarize: {}}, {center_crop: {size: 8}}]", registry.get()),
               Catch::Contains("plugin step 'solarize' changes the final image, so it must come "
                               "after every crop, resize and flip"));
    CHECK_THAT(ParseError("steps: [{center_crop: {size: 8}}, grayscale, horizontal_flip]",
                          registry.get()),
               Catch::Contains("plugin step 'grayscale'"));
    MustParse("steps: [{center_crop: {size: 8}}, grayscale, {solarize: {p: 0.5}}]",
              registry.get());
  }
}

TEST_CASE("a plugin step that fails makes the sample fail as data loss") {
  auto registry = Registry({"libtest_transform_failing.so"});
  const ImagePipeline pipeline =
      MustParse("steps: [{center_crop: {size: 8}}, failing]", registry.get());
  Status status;
  RunOn(pipeline, 0, 0, 0, &status);
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK_THAT(status.ToString(), Catch::Contains("step 'failing' (plugin "));
}

}  // namespace
}  // namespace ember::daemon
