#include "ember/loader.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <thread>

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
               std::chrono::milliseconds reconnect_timeout)
    : client_(client), reconnect_timeout_(reconnect_timeout) {
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
  opened_ = opened;
  received_epoch_ = opened.start_epoch;
  state_.fingerprint = reader_->info().fingerprint;
  state_.seed = options.seed;
  state_.epoch = opened.start_epoch;
  state_.position = opened.start_position;
}

Result<std::optional<RawBatch>> Loader::Reconnect(const Status& why) {
  const auto deadline = std::chrono::steady_clock::now() + reconnect_timeout_;
  std::chrono::milliseconds backoff(100);
  Status last = why;
  std::fprintf(stderr, "ember: job '%s' rank %u: %s; reconnecting to %s\n", opened_.job.c_str(),
               opened_.rank, why.ToString().c_str(), client_.socket_path().c_str());
  reader_.reset();
  while (std::chrono::steady_clock::now() + backoff < deadline) {
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    Status connected = client_.Reconnect(std::chrono::milliseconds(1000));
    if (!connected.ok()) {
      last = connected;
      continue;
    }
    StreamOptions again = opened_;
    again.rejoin = true;
    again.rejoin_epoch = received_epoch_;
    again.rejoin_received = received_;
    auto reader = client_.OpenStream(again);
    if (!reader.ok()) {
      last = reader.status();
      // A daemon still starting up (its catalog loading) or already gone again.
      if (last.code() == StatusCode::kUnavailable || last.code() == StatusCode::kNotFound)
        continue;
      return last.WithContext("opening the stream again");
    }
    reader_ = std::move(reader).value();
    ++reconnects_;
    std::fprintf(stderr, "ember: job '%s' rank %u: reconnected; continuing at batch %llu of epoch %llu\n",
                 opened_.job.c_str(), opened_.rank, static_cast<unsigned long long>(received_),
                 static_cast<unsigned long long>(received_epoch_));
    return reader_->Next();
  }
  return Unavailable("gave up reconnecting to emberd at " + client_.socket_path() + " after " +
                     std::to_string(reconnect_timeout_.count() / 1000) + " s: " + last.ToString());
}

std::optional<Batch> Loader::Next() {
  TORCH_CHECK(reader_ != nullptr, "ember: the stream is broken (an earlier Next failed)");
  auto next = reader_->Next();
  if (!next.ok() && reconnect_timeout_.count() > 0 &&
      (next.status().code() == StatusCode::kUnavailable ||
       next.status().code() == StatusCode::kCancelled))
    next = Reconnect(next.status());
  TORCH_CHECK(next.ok(), "ember: reading the next batch: ", next.status().ToString());
  if (!next->has_value()) return std::nullopt;
  const RawBatch& raw = **next;
  received_epoch_ = raw.last_in_epoch ? raw.epoch + 1 : raw.epoch;
  received_ = raw.last_in_epoch ? 0 : raw.index_in_epoch + 1;
  state_.epoch = raw.last_in_epoch ? raw.epoch + 1 : raw.epoch;
  state_.position = raw.last_in_epoch ? 0 : raw.position;
  return ToTorch(std::move(**next));
}

}  // namespace ember
