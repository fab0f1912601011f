// Fuzzes the IDX reader (ProbeIdx, LoadIdx, ReadSample) on a split of two files held in
// memory. Input: a flags byte (bit 0: the images file is gzip, bit 1: the labels file
// is, bit 2: split "test" instead of "train"), a little-endian u32 length of the images
// file, its bytes, then the labels file's bytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fuzz_input.h"
#include "common/mem_env.h"
#include "daemon/catalog/dataset.h"
#include "daemon/data/idx.h"
#include "daemon/data/source.h"

namespace ember::daemon {
namespace {

// Reading every sample is bounded by the payload's size, which the file's holds.
void ReadAll(const Source& source) {
  const DatasetInfo& info = source.info();
  std::vector<std::vector<char>> buffers;
  std::vector<void*> dsts;
  for (const TensorSpec& tensor : info.tensors) {
    buffers.emplace_back(tensor.SampleBytes());
    dsts.push_back(buffers.back().data());
  }
  for (uint64_t id = 0; id <= info.count; ++id) (void)source.ReadSample(id, SampleContext{}, dsts.data());
}

}  // namespace
}  // namespace ember::daemon

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  using namespace ember::daemon;
  FuzzInput input(data, size);
  const uint8_t flags = input.Byte();
  const std::string images = input.Bytes(input.U32());
  const std::string labels = input.Rest();
  const bool test = (flags & 4) != 0;
  const std::string prefix = std::string("/d/") + (test ? "t10k" : "train");

  MemEnv env;
  env.AddFile(prefix + "-images-idx3-ubyte" + ((flags & 1) ? ".gz" : ""), images);
  env.AddFile(prefix + "-labels-idx1-ubyte" + ((flags & 2) ? ".gz" : ""), labels);
  DatasetSpec spec;
  spec.name = "fuzz";
  spec.format = "idx";
  spec.path = "/d";
  spec.split = test ? "test" : "train";
  (void)ProbeIdx(env, spec);
  Result<std::unique_ptr<Source>> source = LoadIdx(env, spec);
  if (source.ok()) ReadAll(**source);
  return 0;
}
