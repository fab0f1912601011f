// Test helpers for remote decoding: a Source whose rows do not depend on the thread that
// decodes them (so that rows decoded elsewhere can be compared byte for byte), what a
// local decode of some of its samples writes, and a catalog that holds it.
#ifndef EMBER_DAEMON_DECODE_DECODE_TESTING_H_
#define EMBER_DAEMON_DECODE_DECODE_TESTING_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/temp_dir_testing.h"
#include "daemon/catalog/catalog.h"
#include "daemon/data/source.h"

namespace ember::daemon {

// RowSource's fingerprint and sample count.
inline constexpr uint64_t kRowsFingerprint = 0x00c0ffee12345678;
inline constexpr uint64_t kRowsCount = 64;

// Sample i is an int32 [3] tensor {i, seed, epoch} and a uint8 label i%7 (13 bytes); sample
// `bad` (if any) writes garbage and then fails as corrupt data. Thread-safe.
class RowSource : public Source {
 public:
  explicit RowSource(bool parallel, int64_t bad = -1) : parallel_(parallel), bad_(bad) {
    info_.spec.name = "rows";
    info_.count = kRowsCount;
    info_.fingerprint = kRowsFingerprint;
    info_.tensors.push_back({"image", ring::DType::kInt32, {3}});
    info_.tensors.push_back({"label", ring::DType::kUInt8, {}});
  }
  const DatasetInfo& info() const override { return info_; }
  bool ParallelDecode() const override { return parallel_; }
  Status ReadSample(uint64_t id, const SampleContext& ctx, void* const* dsts) const override {
    if (static_cast<int64_t>(id) == bad_) {
      std::memset(dsts[0], 0xab, 12);
      *static_cast<uint8_t*>(dsts[1]) = 0xcd;
      return DataLoss("/data/rows.bin: corrupt at byte 42");
    }
    const int32_t image[3] = {static_cast<int32_t>(id), static_cast<int32_t>(ctx.seed),
                              static_cast<int32_t>(ctx.epoch)};
    std::memcpy(dsts[0], image, sizeof(image));
    *static_cast<uint8_t*>(dsts[1]) = static_cast<uint8_t>(id % 7);
    return Status::Ok();
  }

 private:
  DatasetInfo info_;
  bool parallel_;
  int64_t bad_;
};

// What decoding `ids` of `source` here, one by one, writes, tensor-major (DecodedRows's
// layout); empty if a sample fails.
inline std::vector<uint8_t> DecodeLocally(const Source& source, const std::vector<uint64_t>& ids,
                                          SampleContext context) {
  const auto& tensors = source.info().tensors;
  std::vector<std::vector<uint8_t>> columns;
  for (const TensorSpec& t : tensors) columns.emplace_back(ids.size() * t.SampleBytes());
  std::vector<void*> dsts(tensors.size());
  for (size_t r = 0; r < ids.size(); ++r) {
    for (size_t t = 0; t < tensors.size(); ++t)
      dsts[t] = columns[t].data() + r * tensors[t].SampleBytes();
    if (!source.ReadSample(ids[r], context, dsts.data()).ok()) return {};
  }
  std::vector<uint8_t> out;
  for (const auto& column : columns) out.insert(out.end(), column.begin(), column.end());
  return out;
}

// A catalog in a fresh test directory `dir` holding "data" (an unknown owner's: anyone
// reads it) and "private" (uid 1000's, not shared), both probed as RowSource's info; null
// if that fails.
inline std::unique_ptr<Catalog> RowsCatalog(Env* env, const std::string& dir) {
  const DatasetInfo info = RowSource(false).info();
  auto probe = [info](const DatasetSpec& spec, const DatasetOwner&, IndexingProgress*) {
    DatasetInfo probed = info;
    probed.spec = spec;
    return Result<DatasetInfo>(probed);
  };
  auto catalog = Catalog::Open(env, FreshTestDir(dir), probe);
  if (!catalog.ok()) return nullptr;
  if (!(*catalog)->Add(DatasetSpec{"data", "idx", "/data/rows", "train"}).ok()) return nullptr;
  DatasetOwner owner;
  owner.principal.uid = 1000;
  if (!(*catalog)->Add(DatasetSpec{"private", "idx", "/data/rows", "train"}, owner).ok())
    return nullptr;
  return std::move(catalog).value();
}

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DECODE_DECODE_TESTING_H_
