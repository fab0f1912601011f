#include "ember/loader.h"

#include <c10/util/Exception.h>


namespace ember {
namespace {

torch::Dtype ToTorchDtype(ring::DType dtype) {
  switch (dtype) {
    case ring::DType::kUInt8: return torch::kUInt8;
    case ring::DType::kInt8: return torch::kInt8;
    case ring::DType::kInt16: return torch::kInt16;
    case ring::DType::kInt32: return torch::kInt32;
    case ring::DType::kInt64: return torch::kInt64;
    case ring::DType::kFloat32: return torch::kFloat32;
    case ring::DType::kFloat64: return torch::kFloat64;
    case ring::DType::kUInt16: break;
  }
  TORCH_CHECK(false, "ember: ring dtype ", static_cast<int>(dtype),
              " has no LibTorch equivalent in this version");
}

}  // namespace

const torch::Tensor& Batch::at(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return tensors[i];
  TORCH_CHECK(false, "ember: batch has no tensor named '", name, "'");
}

Batch ToTorch(RawBatch raw) {
  Batch batch;
  batch.epoch = raw.epoch;
  batch.index_in_epoch = raw.index_in_epoch;
  batch.last_in_epoch = raw.last_in_epoch;
  batch.position = raw.position;
  std::shared_ptr<SlotHandle> slot = std::move(raw.slot);
  for (RawTensor& t : raw.tensors) {
    // Each tensor's deleter holds the slot; the last one to go hands it back.
    auto* holder = new std::shared_ptr<SlotHandle>(slot);
    batch.tensors.push_back(torch::from_blob(
        t.data, t.shape, [holder](void*) { delete holder; },
        torch::TensorOptions().dtype(ToTorchDtype(t.dtype))));
    batch.names.push_back(std::move(t.name));
  }
  return batch;
}

Loader::Loader(Client& client, const StreamOptions& options,
               const std::optional<LoaderState>& resume,
               std::chrono::milliseconds reconnect_timeout) {
  auto raw = RawLoader::Open(client, options, resume, reconnect_timeout);
  TORCH_CHECK(raw.ok(), "ember: ", raw.status().ToString());
  raw_ = std::move(raw).value();
}

Result<std::unique_ptr<Loader>> Loader::Open(Client& client, const StreamOptions& options,
                                             const std::optional<LoaderState>& resume,
                                             std::chrono::milliseconds reconnect_timeout) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RawLoader> raw,
                         RawLoader::Open(client, options, resume, reconnect_timeout));
  return std::unique_ptr<Loader>(new Loader(std::move(raw)));
}

std::optional<Batch> Loader::Next() {
  auto next = TryNext();
  TORCH_CHECK(next.ok(), "ember: reading the next batch: ", next.status().ToString());
  return std::move(next).value();
}

Result<std::optional<Batch>> Loader::TryNext(const WaitCheck& check) {
  EMBER_ASSIGN_OR_RETURN(std::optional<RawBatch> next, raw_->TryNext(check));
  if (!next) return std::optional<Batch>();
  return std::optional<Batch>(ToTorch(std::move(*next)));
}

}  // namespace ember
