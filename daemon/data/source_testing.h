// Test helper: one tensor of one sample, read through Source::ReadSample.
#ifndef EMBER_DAEMON_DATA_SOURCE_TESTING_H_
#define EMBER_DAEMON_DATA_SOURCE_TESTING_H_

#include <cstring>
#include <string>
#include <vector>

#include "daemon/data/source.h"

namespace ember::daemon {

// Reads every tensor of sample `id` into scratch buffers and copies tensor `tensor` to
// `dst`. kInvalidArgument for a tensor index out of range.
inline Status ReadSampleTensor(const Source& source, uint64_t id, size_t tensor, void* dst,
                               const SampleContext& context = {}) {
  const auto& tensors = source.info().tensors;
  if (tensor >= tensors.size())
    return InvalidArgument("tensor " + std::to_string(tensor) + " is out of range: dataset '" +
                           source.info().spec.name + "' has " + std::to_string(tensors.size()) +
                           " tensors");
  std::vector<std::string> buffers;
  std::vector<void*> dsts;
  for (const TensorSpec& t : tensors) buffers.emplace_back(t.SampleBytes(), '\0');
  for (std::string& b : buffers) dsts.push_back(b.data());
  EMBER_RETURN_IF_ERROR(source.ReadSample(id, context, dsts.data()));
  std::memcpy(dst, buffers[tensor].data(), buffers[tensor].size());
  return Status::Ok();
}

// Every tensor of one sample, as bytes (buffers filled with 0x55 first, so bytes a
// source failed to write show), and what ReadSample said.
struct SampleBytes {
  Status status;
  std::vector<std::string> tensors;

  // Element `i` of tensor `t` as a T.
  template <typename T>
  T Get(size_t t, size_t i = 0) const {
    T value;
    std::memcpy(&value, tensors[t].data() + i * sizeof(T), sizeof(T));
    return value;
  }
};

// Sample `id` read with seed 5, epoch 1.
inline SampleBytes ReadSampleBytes(const Source& source, uint64_t id) {
  SampleBytes sample;
  std::vector<void*> dsts;
  for (const TensorSpec& t : source.info().tensors)
    sample.tensors.emplace_back(t.SampleBytes(), '\x55');
  for (std::string& t : sample.tensors) dsts.push_back(t.data());
  sample.status = source.ReadSample(id, SampleContext{5, 1}, dsts.data());
  return sample;
}

// The names of the dataset's tensors, in order.
inline std::vector<std::string> TensorNames(const DatasetInfo& info) {
  std::vector<std::string> names;
  for (const TensorSpec& t : info.tensors) names.push_back(t.name);
  return names;
}

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_SOURCE_TESTING_H_
