#include "daemon/data/image/packed_images.h"

#include <cstring>
#include <memory>
#include <string>

#include "daemon/data/image/pipeline.h"

namespace ember::daemon {

Result<RecordCodec> ImageRecordCodec(const pack::PackedDataset& dataset, const DatasetSpec& spec,
                                     const PluginRegistry* plugins) {
  if (dataset.source_format() != "imagefolder")
    return InvalidArgument("packed dataset was packed from format '" + dataset.source_format() +
                           "'; only imagefolder packs can be decoded");
  auto parsed = ImagePipeline::Parse(spec.pipeline, plugins);
  if (!parsed.ok()) return parsed.status();
  auto pipeline = std::make_shared<const ImagePipeline>(std::move(parsed).value());
  RecordCodec codec;
  codec.tensors.push_back(TensorSpec{"image", pipeline->dtype(), pipeline->shape()});
  codec.tensors.push_back(TensorSpec{"label", ring::DType::kInt64, {}});
  codec.parallel_decode = true;
  codec.decode = [pipeline](const pack::PackedRecord& record, uint64_t id, const SampleContext& context,
                            void* const* dsts) -> Status {
    EMBER_RETURN_IF_ERROR(pipeline->Run(std::string(record.path), record.data, record.size,
                                        context.seed, context.epoch, id, dsts[0]));
    std::memcpy(dsts[1], &record.label, sizeof(record.label));
    return Status::Ok();
  };
  return codec;
}

}  // namespace ember::daemon
