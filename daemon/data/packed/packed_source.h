// Format "packed": a packed dataset directory (format.h, written by `emberctl pack`)
// served as a Source. spec.path is the directory; spec.split is recorded, not
// interpreted (a pack holds one split).
//
// What a record becomes is not known here: records are encoded samples of the pack's
// source format (the manifest's, e.g. "imagefolder": JPEG/PNG bytes). The caller hands in
// a RecordCodecFactory that builds, from the opened dataset and the spec (its pipeline),
// the tensors and the function that decodes one record into them.
#ifndef EMBER_DAEMON_DATA_PACKED_PACKED_SOURCE_H_
#define EMBER_DAEMON_DATA_PACKED_PACKED_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "daemon/catalog/dataset.h"
#include "common/env.h"
#include "pack/packed_dataset.h"
#include "daemon/data/source.h"
#include "ember/status.h"

namespace ember::daemon {

// How the records of one packed dataset become a sample's tensors.
struct RecordCodec {
  std::vector<TensorSpec> tensors;
  // Writes every tensor of sample `id` from its record (checksum already verified):
  // tensor t to dsts[t], exactly tensors[t].SampleBytes() bytes. Called concurrently by
  // decode threads: must be thread-safe. A record that cannot be decoded is kDataLoss
  // with the reason; the source prefixes "<shard file> record N (<original path>): ", so
  // the message need not name the file.
  std::function<Status(const pack::PackedRecord& record, uint64_t id, const SampleContext& context,
                       void* const* dsts)>
      decode;
  // Source::ParallelDecode(): true when decode does real work (image decoding).
  bool parallel_decode = true;
};

// Builds the codec for `dataset` (its source_format(), class_names(), count(); it may
// read records) as registered with `spec` (its pipeline). kInvalidArgument for a source
// format or pipeline it cannot serve. Called once per probe or load.
using RecordCodecFactory =
    std::function<Result<RecordCodec>(const pack::PackedDataset& dataset, const DatasetSpec& spec)>;

// Opens the dataset (all of pack::PackedDataset::Open's checks) and builds its codec.
// info.spec.path is made absolute; info.files lists the manifest and the shards.
// kNotFound / kDataLoss from Open; kInvalidArgument for a codec without a decode function
// or tensors, or the factory's errors.
Result<DatasetInfo> ProbePacked(Env& env, const DatasetSpec& spec,
                                const RecordCodecFactory& codec_factory);

// The same, and the Source. ReadSample verifies the record's checksum before decoding
// (kDataLoss "<shard file> record N (<original path>): checksum mismatch: ..."), so a
// corrupt shard never yields garbage samples; Prefetch asks the kernel for the records'
// pages. The source keeps the shards mapped; it is thread-safe.
Result<std::unique_ptr<Source>> LoadPacked(Env& env, const DatasetSpec& spec,
                                           const RecordCodecFactory& codec_factory);

// A codec that serves records undecoded, e.g. for trainers that decode on the GPU, and
// for tests. Tensors:
//   "size"  int64 []            the record's byte count
//   "bytes" uint8 [max_bytes]   its bytes, zero-padded
//   "label" int64 []            its label
// A record longer than max_bytes is kInvalidArgument naming its size. parallel_decode is
// false (a copy). max_bytes > 0.
RecordCodec RawRecordCodec(uint64_t max_bytes);

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_PACKED_PACKED_SOURCE_H_
