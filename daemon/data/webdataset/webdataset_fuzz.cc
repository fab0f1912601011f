// Fuzzes the webdataset format (shard patterns, tar indexing, sample grouping, labels,
// .npy headers, image members): ExpandBraces on a pattern, then ProbeWebDataset,
// LoadWebDataset and every sample's ReadSample on one shard held in memory. Input: a byte
// N, a pattern of N bytes, then the shard's bytes (a tar archive).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fuzz_input.h"
#include "common/mem_env.h"
#include "daemon/catalog/dataset.h"
#include "daemon/data/source.h"
#include "daemon/data/webdataset/shard_list.h"
#include "daemon/data/webdataset/webdataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  using namespace ember::daemon;
  FuzzInput input(data, size);
  const std::string pattern = input.Bytes(input.Byte());
  (void)ExpandBraces(pattern);  // bounded by kMaxShards whatever the pattern says

  MemEnv env;
  env.AddFile("/d/s.tar", input.Rest());
  DatasetSpec spec;
  spec.name = "fuzz";
  spec.format = "webdataset";
  spec.path = "/d";
  spec.pipeline = "steps: [{resize: {size: [4, 4]}}]";
  (void)ProbeWebDataset(env, spec);
  Result<std::unique_ptr<Source>> source = LoadWebDataset(env, spec);
  if (!source.ok()) return 0;
  const daemon::DatasetInfo& info = (*source)->info();
  std::vector<std::vector<char>> buffers;
  std::vector<void*> dsts;
  for (const TensorSpec& tensor : info.tensors) {
    buffers.emplace_back(tensor.SampleBytes());
    dsts.push_back(buffers.back().data());
  }
  for (uint64_t id = 0; id <= info.count; ++id)
    (void)(*source)->ReadSample(id, SampleContext{}, dsts.data());
  return 0;
}
