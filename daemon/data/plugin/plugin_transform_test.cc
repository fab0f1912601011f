#include "daemon/data/plugin/plugin_transform.h"

#include <dlfcn.h>

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/random.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/plugin/plugin_testing.h"

namespace ember::daemon {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::shared_ptr<const Plugin> MustLoad(const std::string& file) {
  auto plugin = LoadPlugin(TestPluginPath(file));
  INFO(file);
  REQUIRE(plugin.ok());
  return *plugin;
}

std::shared_ptr<const TransformStep> MustCreate(const std::string& step,
                                                const TransformParams& params) {
  auto created = TransformStep::Create(MustLoad("libember_color_plugin.so"), step, params);
  INFO((created.ok() ? std::string() : created.status().message()));
  REQUIRE(created.ok());
  return *created;
}

// The error message of settings the step must refuse.
std::string CreateError(const std::string& step, const TransformParams& params) {
  auto created = TransformStep::Create(MustLoad("libember_color_plugin.so"), step, params);
  REQUIRE_FALSE(created.ok());
  CHECK(created.status().code() == StatusCode::kInvalidArgument);
  return created.status().message();
}

// A width x 1 image whose bytes are 0, 1, ..., 255, 0, 1, ...
std::vector<uint8_t> Ramp(int width) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i % 256);
  return pixels;
}

// Random bytes for a w x h image, from `seed`.
std::vector<uint8_t> Noise(int width, int height, uint64_t seed) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  SplitMix64 random(seed);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(random.Next() >> 56);
  return pixels;
}

constexpr uint64_t kAlways = 0;     // a random value that any p > 0 takes
constexpr uint64_t kNever = ~0ull;  // one that any p < 1 refuses

TEST_CASE("solarize inverts the values at or above the threshold") {
  for (int threshold : {0, 1, 128, 200, 255}) {
    INFO("threshold " << threshold);
    auto step = MustCreate("solarize", {{"threshold", std::to_string(threshold)}});
    CHECK(step->name() == "solarize");
    CHECK(Contains(step->plugin().path(), "/libember_color_plugin.so"));
    std::vector<uint8_t> pixels = Ramp(100);  // 300 bytes: every value
    REQUIRE(step->Apply(pixels.data(), 100, 1, kAlways).ok());
    for (size_t i = 0; i < pixels.size(); ++i) {
      const int v = static_cast<int>(i % 256);
      if (pixels[i] != (v >= threshold ? 255 - v : v)) {
        FAIL("byte " << i << ": " << int(pixels[i]) << " from " << v);
      }
    }
  }
  // The defaults: threshold 128, p 1 (applies whatever the random value).
  auto step = MustCreate("solarize", {});
  std::vector<uint8_t> pixels = {0, 127, 128, 255, 10, 200};
  REQUIRE(step->Apply(pixels.data(), 2, 1, kNever).ok());
  CHECK(pixels == std::vector<uint8_t>{0, 127, 127, 0, 10, 55});
}

TEST_CASE("grayscale writes ITU-R 601-2 luma to all three channels, as PIL") {
  auto step = MustCreate("grayscale", {});
  std::vector<uint8_t> pixels = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0,
                                 10, 20, 30};
  REQUIRE(step->Apply(pixels.data(), 3, 2, kNever).ok());
  // PIL: Image.new("RGB", (1, 1), c).convert("L") gives 76, 150, 29, 255, 0 and 18.
  CHECK(pixels == std::vector<uint8_t>{76, 76, 76, 150, 150, 150, 29, 29, 29, 255, 255, 255,
                                       0, 0, 0, 18, 18, 18});
}

TEST_CASE("p decides from the random value alone") {
  const std::vector<uint8_t> original = Noise(8, 5, 1);
  auto apply = [&](const std::shared_ptr<const TransformStep>& step, uint64_t random) {
    std::vector<uint8_t> pixels = original;
    REQUIRE(step->Apply(pixels.data(), 8, 5, random).ok());
    return pixels;
  };
  for (const char* name : {"solarize", "grayscale"}) {
    INFO(name);
    auto never = MustCreate(name, {{"p", "0"}});
    CHECK(apply(never, kAlways) == original);
    CHECK(apply(never, 12345) == original);
    auto half = MustCreate(name, {{"p", "0.5"}});
    CHECK(apply(half, kAlways) != original);
    CHECK(apply(half, kNever) == original);
    CHECK(apply(half, 1ull << 62) != original);  // uniform 0.25
    CHECK(apply(half, 3ull << 62) == original);  // uniform 0.75
    int applied = 0;
    SplitMix64 values(7);
    for (int i = 0; i < 200; ++i) {
      const uint64_t random = values.Next();
      const std::vector<uint8_t> once = apply(half, random);
      CHECK(apply(half, random) == once);  // the same value, the same bytes
      applied += once != original;
    }
    CHECK(applied > 70);
    CHECK(applied < 130);
  }
}

TEST_CASE("settings the plugin refuses are errors naming the step, key, value and file") {
  struct Case {
    const char* step;
    TransformParams params;
    std::string message;
  };
  const std::string threshold = "threshold: expected an integer in 0..255, got ";
  const std::string p = "p: expected a probability in [0, 1], got ";
  const Case cases[] = {
      {"solarize", {{"threshold", "256"}}, threshold + "'256'"},
      {"solarize", {{"threshold", "-1"}}, threshold + "'-1'"},
      {"solarize", {{"threshold", "12.5"}}, threshold + "'12.5'"},
      {"solarize", {{"threshold", " 12"}}, threshold + "' 12'"},
      {"solarize", {{"threshold", ""}}, threshold + "''"},
      {"solarize", {{"threshold", "128"}, {"p", "1.5"}}, p + "'1.5'"},
      {"solarize", {{"p", "nan"}}, p + "'nan'"},
      {"solarize", {{"thresh", "3"}}, "unknown key 'thresh' (known: threshold, p)"},
      {"grayscale", {{"p", "-0.1"}}, p + "'-0.1'"},
      {"grayscale", {{"threshold", "3"}}, "unknown key 'threshold' (known: p)"},
  };
  for (const Case& c : cases) {
    const std::string message = CreateError(c.step, c.params);
    INFO(message);
    CHECK(Contains(message, std::string("step '") + c.step + "' (plugin /"));
    CHECK(Contains(message, "/libember_color_plugin.so): " + c.message));
  }
  CHECK(Contains(CreateError("solarize", {{"p", "1"}, {"threshold", "3"}, {"p", "0"}}),
                 "/libember_color_plugin.so): key 'p' is given twice"));
}

TEST_CASE("TransformStep::Create needs a plugin that adds the step") {
  auto missing = TransformStep::Create(MustLoad("libember_color_plugin.so"), "resize", {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(Contains(missing.status().message(),
                 "/libember_color_plugin.so adds no pipeline step 'resize'"));

  auto reader = TransformStep::Create(MustLoad("libtest_csv_and_color.so"), "solarize", {});
  REQUIRE(reader.ok());  // a reader may add steps too
  CHECK_FALSE(TransformStep::Create(nullptr, "solarize", {}).ok());
}

TEST_CASE("plugin failures name the step and the file") {
  auto plugin = MustLoad("libtest_transform_failing.so");
  auto refused = TransformStep::Create(plugin, "failing", {{"refuse", "yes"}});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(refused.status().message(), "step 'failing' (plugin /"));
  CHECK(Contains(refused.status().message(),
                 "/libtest_transform_failing.so): create failed (the plugin gave no message)"));

  auto step = TransformStep::Create(plugin, "failing", {{"anything", "goes"}});
  REQUIRE(step.ok());
  std::vector<uint8_t> pixels(4 * 3 * 3);
  Status applied = (*step)->Apply(pixels.data(), 4, 3, 7);
  CHECK(applied.code() == StatusCode::kDataLoss);
  CHECK(Contains(applied.message(),
                 "/libtest_transform_failing.so): cannot transform a 4x3 image"));

  Status empty = (*step)->Apply(pixels.data(), 0, 3, 7);
  CHECK(empty.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(empty.message(), "step 'failing' (plugin /"));
  CHECK(Contains(empty.message(), "cannot apply to a 0x3 image"));
  CHECK((*step)->Apply(nullptr, 4, 3, 7).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a TransformStep keeps its library loaded and destroys its state") {
  auto plugin = MustLoad("libtest_transform_failing.so");
  const std::string path = plugin->path();
  auto created = TransformStep::Create(plugin, "failing", {});
  REQUIRE(created.ok());
  std::shared_ptr<const TransformStep> step = *created;
  plugin.reset();
  created = NotFound("dropped");  // only `step` holds the plugin now

  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(library != nullptr);  // still loaded
  auto live_states = reinterpret_cast<int (*)()>(dlsym(library, "ember_test_live_states"));
  REQUIRE(live_states != nullptr);
  CHECK(live_states() == 1);
  std::vector<uint8_t> pixels(3);
  CHECK(step->Apply(pixels.data(), 1, 1, 0).code() == StatusCode::kDataLoss);
  step.reset();
  CHECK(live_states() == 0);
  dlclose(library);
}

TEST_CASE("Apply from several threads on one step gives the bytes of a serial run") {
  auto registry = PluginRegistry::Load({TestPluginPath("libember_color_plugin.so")});
  REQUIRE(registry.ok());
  // As the pipeline will: find the plugin by step name, create, apply in order.
  std::vector<std::shared_ptr<const TransformStep>> steps;
  const std::pair<const char*, TransformParams> config[] = {
      {"solarize", {{"threshold", "100"}, {"p", "0.5"}}},
      {"grayscale", {{"p", "0.5"}}},
  };
  for (const auto& [name, params] : config) {
    auto created = TransformStep::Create((*registry)->FindTransform(name), name, params);
    REQUIRE(created.ok());
    steps.push_back(*created);
  }
  constexpr int kImages = 64;
  auto width = [](int i) { return 7 + i % 13; };
  auto height = [](int i) { return 5 + i % 11; };
  auto random = [](int i, size_t step) { return ChainSeed({uint64_t(i), step}); };
  auto run = [&](int i) {
    std::vector<uint8_t> pixels = Noise(width(i), height(i), i);
    for (size_t s = 0; s < steps.size(); ++s) {
      if (!steps[s]->Apply(pixels.data(), width(i), height(i), random(i, s)).ok()) return pixels;
    }
    return pixels;
  };
  std::vector<std::vector<uint8_t>> serial;
  int changed = 0;
  for (int i = 0; i < kImages; ++i) {
    serial.push_back(run(i));
    changed += serial.back() != Noise(width(i), height(i), i);
  }
  CHECK(changed > kImages / 2);  // some steps applied (3/4 expected)...
  CHECK(changed < kImages);      // ...and for some images none did

  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 8; ++round) {
        for (int i = (t + round) % kImages; i < kImages; i += 3) {
          if (run(i) != serial[i]) ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(wrong == 0);
}

}  // namespace
}  // namespace ember::daemon
