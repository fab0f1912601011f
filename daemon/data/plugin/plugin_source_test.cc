#include "daemon/data/plugin/plugin_source.h"

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/temp_dir_testing.h"
#include "daemon/data/plugin/plugin_testing.h"
#include "daemon/data/source_testing.h"
#include "ember/ring_layout.h"

namespace ember::daemon {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::shared_ptr<const Plugin> CsvPlugin() {
  auto plugin = LoadPlugin(TestPluginPath("libember_csv_plugin.so"));
  REQUIRE(plugin.ok());
  return *plugin;
}

DatasetSpec Spec(const std::string& path) {
  DatasetSpec spec;
  spec.name = "tiny";
  spec.format = "csv";
  spec.path = path;
  return spec;
}

TEST_CASE("csv plugin: probe reports the layout") {
  const std::string path = WriteTempFile("probe.csv", "0.5,1,2.25,3\n-1,0,4e2,7\r\n");
  auto info = ProbeWithPlugin(CsvPlugin(), Spec(path));
  REQUIRE(info.ok());
  CHECK(info->count == 2);
  REQUIRE(info->tensors.size() == 2);
  CHECK(info->tensors[0].name == "features");
  CHECK(info->tensors[0].dtype == ring::DType::kFloat32);
  CHECK(info->tensors[0].shape == std::vector<int64_t>{3});
  CHECK(info->tensors[1].name == "label");
  CHECK(info->tensors[1].dtype == ring::DType::kInt64);
  CHECK(info->tensors[1].shape.empty());
  CHECK(info->files == std::vector<std::string>{path});
  CHECK(info->spec.name == "tiny");
}

TEST_CASE("csv plugin: samples read through the Source, also concurrently") {
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text += std::to_string(i) + ".5," + std::to_string(-i) + "," + std::to_string(i % 10) + "\n";
  }
  const std::string path = WriteTempFile("read.csv", text);
  auto source = LoadWithPlugin(CsvPlugin(), Spec(path));
  REQUIRE(source.ok());
  const Source& s = **source;
  CHECK(s.info().count == 100);
  CHECK_FALSE(s.ParallelDecode());

  float features[2];
  int64_t label = -1;
  REQUIRE(ReadSampleTensor(s, 37, 0, features).ok());
  REQUIRE(ReadSampleTensor(s, 37, 1, &label).ok());
  CHECK(features[0] == 37.5f);
  CHECK(features[1] == -37.0f);
  CHECK(label == 7);

  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&s, &wrong, t] {
      for (int i = t; i < 100; i += 4) {
        float f[2];
        int64_t l = 0;
        void* dsts[2] = {f, &l};
        if (!s.ReadSample(i, SampleContext{1, 2}, dsts).ok() || f[0] != i + 0.5f || l != i % 10) {
          ++wrong;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(wrong == 0);

  Status out_of_range = ReadSampleTensor(s, 100, 0, features);
  CHECK(out_of_range.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(out_of_range.message(), "sample 100 is out of range"));
}

TEST_CASE("csv plugin: a bad file is refused with its name and line") {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"1,2,3\n4,5\n", "line 2: expected 3 fields like line 1, got 2"},
      {"1,2,3\n4,x,6\n", "line 2: field 2: expected a finite number, got 'x'"},
      {"1,2,3\n4,5,6\n7,8,9.5\n", "line 3: field 3: expected an integer label, got '9.5'"},
      {"1,2,3\n\n4,5,6\n", "line 2: empty line"},
      {"7\n", "line 1: expected at least 2 fields"},
      {"", "no samples"},
  };
  auto plugin = CsvPlugin();
  for (const Case& c : cases) {
    const std::string path = WriteTempFile("bad.csv", c.text);
    auto info = ProbeWithPlugin(plugin, Spec(path));
    INFO(c.text);
    REQUIRE_FALSE(info.ok());
    CHECK(info.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(info.status().message(), "csv: " + path + ": " + c.error));
    CHECK_FALSE(LoadWithPlugin(plugin, Spec(path)).ok());
  }

  auto missing = ProbeWithPlugin(plugin, Spec(WriteTempFile("x.csv", "1,2\n") + ".missing"));
  REQUIRE_FALSE(missing.ok());
  CHECK(Contains(missing.status().message(), "x.csv.missing: cannot open"));

  DatasetSpec with_pipeline = Spec(WriteTempFile("p.csv", "1,2\n"));
  with_pipeline.pipeline = "resize: 3\n";
  auto refused = ProbeWithPlugin(plugin, with_pipeline);
  REQUIRE_FALSE(refused.ok());
  CHECK(Contains(refused.status().message(), "takes no pipeline"));
}

TEST_CASE("csv plugin: the Source keeps the library loaded after the Plugin is dropped") {
  const std::string path = WriteTempFile("keep.csv", "1.5,2\n");
  std::unique_ptr<Source> source;
  {
    auto loaded = LoadWithPlugin(CsvPlugin(), Spec(path));
    REQUIRE(loaded.ok());
    source = std::move(*loaded);
  }
  float feature = 0;
  REQUIRE(ReadSampleTensor(*source, 0, 0, &feature).ok());
  CHECK(feature == 1.5f);
}

TEST_CASE("a plugin without a reader reads no dataset") {
  auto plugin = LoadPlugin(TestPluginPath("libember_color_plugin.so"));
  REQUIRE(plugin.ok());
  const DatasetSpec spec = Spec(WriteTempFile("color.csv", "1,2\n"));
  auto probed = ProbeWithPlugin(*plugin, spec);
  REQUIRE_FALSE(probed.ok());
  CHECK(probed.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(probed.status().message(), "/libember_color_plugin.so reads no dataset format"));
  auto loaded = LoadWithPlugin(*plugin, spec);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ember::daemon
