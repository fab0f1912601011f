// Batch tensors are views into the mapped ring (no copy), and a slot goes back to the
// daemon only when the last tensor viewing it is released.
#include <catch2/catch.hpp>

#include <torch/types.h>

#include "ember/loader.h"
#include "tests/support/test_env.h"

namespace ember::testing {
namespace {

bool Inside(const StreamReader& reader, const void* p, size_t n) {
  auto base = reinterpret_cast<uintptr_t>(reader.ring_base());
  auto at = reinterpret_cast<uintptr_t>(p);
  return at >= base && at + n <= base + reader.ring_size();
}

TEST_CASE("batch tensors' storage lies inside the mapped ring") {
  Daemon daemon;
  {
    auto client = StartWithSyntheticDataset(daemon, 500);
    Loader loader(*client, ReaderOptions("zero-copy", 32, 2));
    int batches = 0;
    for (int epoch = 0; epoch < 2; ++epoch) {
      while (auto batch = loader.Next()) {
        const torch::Tensor& image = batch->at("image");
        const torch::Tensor& label = batch->at("label");
        REQUIRE(image.dtype() == torch::kUInt8);
        REQUIRE(image.dim() == 3);
        REQUIRE(image.size(1) == 28);
        REQUIRE(Inside(loader.reader(), image.data_ptr(), image.nbytes()));
        REQUIRE(Inside(loader.reader(), label.data_ptr(), label.nbytes()));
        REQUIRE(Inside(loader.reader(), image.storage().data(), image.storage().nbytes()));
        // The tensor is the ring's bytes: the id the daemon wrote is in the first pixels.
        const auto id = SyntheticId(image[0].data_ptr<uint8_t>());
        CHECK(label[0].item<int>() == static_cast<int>(id % 10));
        ++batches;
      }
    }
    CHECK(batches == 2 * 16);
  }
  daemon.Stop();
}

TEST_CASE("a slot is held while any tensor views it") {
  Daemon daemon;
  {
    auto client = StartWithSyntheticDataset(daemon, 500);
    StreamOptions options = ReaderOptions("holding", 8, 0);
    options.slots = 2;
    auto reader = client->OpenStream(options);
    REQUIRE(reader.ok());
    auto first = (*reader)->Next();
    auto second = (*reader)->Next();
    REQUIRE(first.ok());
    REQUIRE(second.ok());
    // Keep only a label tensor of the first batch alive; release the second batch.
    torch::Tensor label = ToTorch(std::move(**first)).at("label");
    const torch::Tensor label_copy = label.clone();
    second->reset();
    // The writer skips the slot `label` holds: more batches flow through the other one,
    // and the held tensor never changes under the trainer.
    for (int i = 0; i < 3; ++i) {
      auto more = (*reader)->Next();
      REQUIRE(more.ok());
      REQUIRE(more->has_value());
      CHECK(torch::equal(label, label_copy));
    }
    // Holding both slots, the next batch is refused, not waited for.
    auto held = (*reader)->Next();
    REQUIRE(held.ok());
    torch::Tensor second_label = ToTorch(std::move(**held)).at("label");
    auto blocked = (*reader)->Next();
    REQUIRE_FALSE(blocked.ok());
    CHECK(blocked.status().code() == StatusCode::kFailedPrecondition);
    // Dropping the last view of a batch hands its slot back; the daemon refills it.
    label = torch::Tensor();
    auto third = (*reader)->Next();
    REQUIRE(third.ok());
    REQUIRE(third->has_value());
    CHECK((*third)->num_samples == 8);
  }
  daemon.Stop();
}

}  // namespace
}  // namespace ember::testing
