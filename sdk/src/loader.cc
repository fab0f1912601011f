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
               const std::optional<LoaderState>& resume) {
  StreamOptions opened = options;
  if (resume) {
    TORCH_CHECK(resume->seed == options.seed, "ember: the loader state is of seed ",
                resume->seed, ", the loader's seed is ", options.seed, " (", resume->ToString(),
                ")");
    TORCH_CHECK(resume->epoch <= UINT32_MAX, "ember: loader state epoch ", resume->epoch,
                " is out of range");
    opened.start_epoch = static_cast<uint32_t>(resume->epoch);
    opened.start_position = resume->position;
    opened.fingerprint = resume->fingerprint;
  }
  auto reader = client.OpenStream(opened);
  TORCH_CHECK(reader.ok(), "ember: opening stream of dataset '", options.dataset, "' for job '",
              options.job, "' rank ", options.rank, ": ", reader.status().ToString());
  reader_ = std::move(reader).value();
  state_.fingerprint = reader_->info().fingerprint;
  state_.seed = options.seed;
  state_.epoch = opened.start_epoch;
  state_.position = opened.start_position;
}

std::optional<Batch> Loader::Next() {
  auto next = reader_->Next();
  TORCH_CHECK(next.ok(), "ember: reading the next batch: ", next.status().ToString());
  if (!next->has_value()) return std::nullopt;
  const RawBatch& raw = **next;
  state_.epoch = raw.last_in_epoch ? raw.epoch + 1 : raw.epoch;
  state_.position = raw.last_in_epoch ? 0 : raw.position;
  return ToTorch(std::move(**next));
}

}  // namespace ember
