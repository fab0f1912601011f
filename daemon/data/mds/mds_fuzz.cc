// Fuzzes the mds format (index.json parsing and checking, shard headers, sample heads,
// ndarray values, zstd, hashes, number parsing, images): ParseMdsIndex on the index, then
// ProbeMds, LoadMds and every sample's ReadSample of a set held in memory. Input: a
// little-endian uint32 N, index.json's N bytes, then the bytes of the one shard file, which
// is there as /d/shard.00000.mds and /d/shard.00000.mds.zstd.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fuzz_input.h"
#include "common/mem_env.h"
#include "daemon/catalog/dataset.h"
#include "daemon/data/mds/mds.h"
#include "daemon/data/mds/mds_index.h"
#include "daemon/data/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  using namespace ember::daemon;
  FuzzInput input(data, size);
  const std::string index = input.Bytes(input.U32());
  const std::string shard = input.Rest();
  (void)ParseMdsIndex("/d/index.json", index);

  MemEnv env;
  env.AddFile("/d/index.json", index);
  env.AddFile("/d/shard.00000.mds", shard);
  env.AddFile("/d/shard.00000.mds.zstd", shard);
  DatasetSpec spec;
  spec.name = "fuzz";
  spec.format = "mds";
  spec.path = "/d";
  spec.pipeline = "steps: [{resize: {size: [4, 4]}}]";
  (void)ProbeMds(env, spec);
  Result<std::unique_ptr<Source>> source = LoadMds(env, spec);
  if (!source.ok()) return 0;
  const daemon::DatasetInfo& info = (*source)->info();
  std::vector<std::vector<char>> buffers;
  std::vector<void*> dsts;
  for (const TensorSpec& tensor : info.tensors) {
    buffers.emplace_back(tensor.SampleBytes());
    dsts.push_back(buffers.back().data());
  }
  for (uint64_t id = 0; id <= info.count && id < 4096; ++id)
    (void)(*source)->ReadSample(id, SampleContext{}, dsts.data());
  return 0;
}
