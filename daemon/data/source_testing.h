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

}  // namespace ember::daemon

#endif  // EMBER_DAEMON_DATA_SOURCE_TESTING_H_
