#include "daemon/data/packed/packed_source.h"

#include <cstring>
#include <string>
#include <utility>

#include "ember/ring_layout.h"

namespace ember::daemon {

namespace {

struct Opened {
  std::unique_ptr<pack::PackedDataset> dataset;
  RecordCodec codec;
  DatasetInfo info;
};

Result<Opened> Open(Env& env, const DatasetSpec& spec, const RecordCodecFactory& codec_factory) {
  Opened opened;
  EMBER_ASSIGN_OR_RETURN(opened.dataset, pack::PackedDataset::Open(env, spec.path));
  const pack::PackedDataset& dataset = *opened.dataset;
  if (!codec_factory) return InvalidArgument("no record codec for packed dataset " + dataset.dir());
  Result<RecordCodec> codec = codec_factory(dataset, spec);
  if (!codec.ok()) {
    return codec.status().WithContext(dataset.dir() + " (packed from " +
                                      dataset.source_format() + ")");
  }
  opened.codec = std::move(*codec);
  if (!opened.codec.decode || opened.codec.tensors.empty()) {
    return InvalidArgument(dataset.dir() + ": the record codec for source format '" +
                           dataset.source_format() + "' has no decode function or no tensors");
  }
  DatasetInfo& info = opened.info;
  info.spec = spec;
  info.spec.path = dataset.dir();
  info.count = dataset.count();
  info.tensors = opened.codec.tensors;
  info.files = dataset.Files();
  return opened;
}

// Immutable after construction: ReadSample and Prefetch need no lock.
class PackedSource : public Source {
 public:
  explicit PackedSource(Opened opened)
      : dataset_(std::move(opened.dataset)),
        codec_(std::move(opened.codec)),
        info_(std::move(opened.info)) {}

  const DatasetInfo& info() const override { return info_; }

  Status ReadSample(uint64_t id, const SampleContext& context, void* const* dsts) const override {
    EMBER_RETURN_IF_ERROR(CheckInRange(id));
    const pack::PackedRecord record = dataset_->Get(id);
    EMBER_RETURN_IF_ERROR(dataset_->VerifyRecord(record));
    Status status = codec_.decode(record, id, context, dsts);
    EMBER_RETURN_IF_ERROR(dataset_->CheckShard(record));  // truncated while decoding
    if (!status.ok()) return status.WithContext(dataset_->RecordName(record));
    return Status::Ok();
  }

  bool ParallelDecode() const override { return codec_.parallel_decode; }

  void Prefetch(const uint64_t* ids, size_t count) const override {
    dataset_->Prefetch(ids, count);
  }

 private:
  const std::unique_ptr<pack::PackedDataset> dataset_;
  const RecordCodec codec_;
  const DatasetInfo info_;
};

}  // namespace

Result<DatasetInfo> ProbePacked(Env& env, const DatasetSpec& spec,
                                const RecordCodecFactory& codec_factory) {
  EMBER_ASSIGN_OR_RETURN(Opened opened, Open(env, spec, codec_factory));
  return std::move(opened.info);
}

Result<std::unique_ptr<Source>> LoadPacked(Env& env, const DatasetSpec& spec,
                                           const RecordCodecFactory& codec_factory) {
  EMBER_ASSIGN_OR_RETURN(Opened opened, Open(env, spec, codec_factory));
  return std::unique_ptr<Source>(std::make_unique<PackedSource>(std::move(opened)));
}

RecordCodec RawRecordCodec(uint64_t max_bytes) {
  RecordCodec codec;
  codec.tensors = {
      TensorSpec{"size", ring::DType::kInt64, {}},
      TensorSpec{"bytes", ring::DType::kUInt8, {static_cast<int64_t>(max_bytes)}},
      TensorSpec{"label", ring::DType::kInt64, {}},
  };
  codec.parallel_decode = false;
  codec.decode = [max_bytes](const pack::PackedRecord& record, uint64_t, const SampleContext&,
                             void* const* dsts) -> Status {
    if (record.size > max_bytes) {
      return InvalidArgument("the record has " + std::to_string(record.size) +
                             " bytes, more than the " + std::to_string(max_bytes) +
                             " of the raw codec's bytes tensor");
    }
    const int64_t size = static_cast<int64_t>(record.size);
    std::memcpy(dsts[0], &size, sizeof(size));
    auto* bytes = static_cast<uint8_t*>(dsts[1]);
    if (record.size > 0) std::memcpy(bytes, record.data, record.size);
    std::memset(bytes + record.size, 0, static_cast<size_t>(max_bytes - record.size));
    std::memcpy(dsts[2], &record.label, sizeof(record.label));
    return Status::Ok();
  };
  return codec;
}

}  // namespace ember::daemon
