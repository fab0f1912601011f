// The format registry with a plugin registry beside the built-in formats.
#include <catch2/catch.hpp>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/data/formats.h"
#include "daemon/data/plugin/plugin_registry.h"
#include "daemon/data/plugin/plugin_testing.h"
#include "daemon/data/source_testing.h"

namespace ember::daemon {
namespace {

TEST_CASE("formats from plugins probe and load; unknown ones list them") {
  auto env = NewPosixEnv();
  DatasetSpec spec;
  spec.name = "tiny";
  spec.format = "csv";
  spec.path = WriteTempFile("formats.csv", "1.5,2.5,3\n4,5,6\n");
  CHECK(ProbeDataset(*env, spec).status().code() == StatusCode::kInvalidArgument);

  auto plugins = PluginRegistry::Load({TestPluginPath("libember_csv_plugin.so")});
  REQUIRE(plugins.ok());
  const PluginRegistry* registry = plugins->get();
  REQUIRE(CheckPluginFormats(*registry).ok());

  auto info = ProbeDataset(*env, spec, registry);
  REQUIRE(info.ok());
  CHECK(info->count == 2);
  auto source = LoadDataset(*env, spec, registry);
  REQUIRE(source.ok());
  int64_t label = 0;
  REQUIRE(ReadSampleTensor(**source, 1, 1, &label).ok());
  CHECK(label == 6);

  spec.format = "wav";
  CHECK(ProbeDataset(*env, spec, registry).status().message() ==
        "unknown format 'wav' (known: idx, imagefolder, mds, packed, parquet, tokens, webdataset, csv)");
  spec.format = "idx";
  CHECK(ProbeDataset(*env, spec, registry).status().code() != StatusCode::kOk);
}

}  // namespace
}  // namespace ember::daemon
