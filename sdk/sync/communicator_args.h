// What every communicator factory (Gloo, NCCL, shared memory) checks of its arguments
// before its rendezvous, and the CPU communicators of their tensors, with one wording for
// all (internal).
#ifndef EMBER_SDK_SYNC_COMMUNICATOR_ARGS_H_
#define EMBER_SDK_SYNC_COMMUNICATOR_ARGS_H_

#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "sdk/sync/error_message.h"

namespace ember::sdk {

// Returns "<backend> communicator '<name>' (rank R of W)", the start of the factory's
// error messages, once 1 <= world_size <= max_world_size, 0 <= rank < world_size and
// timeout > 0. Throws c10::Error otherwise: "<where>: world size must be at least 1"
// ("... must be 1 to <max_world_size>" when there is a bound), "<where>: rank is outside
// the world", "<where>: timeout must be positive, got <T> ms".
std::string CheckCommunicatorArgs(const std::string& backend, const std::string& name, int rank,
                                  int world_size, std::chrono::milliseconds timeout,
                                  int max_world_size = std::numeric_limits<int>::max());

// Throws c10::Error "<where>: tensor I is undefined", "<where>: tensor I must be a dense CPU
// tensor, got <type> on <device>", or, unless `bool_ok`, "<where>: tensor I is bool, which
// has no sum", for the first tensor of `tensors` that is so.
void CheckCpuTensors(const std::vector<at::Tensor>& tensors, const std::string& where,
                     bool bool_ok);

// The first error of a communicator whose collectives run on the calling thread (shared
// memory, hierarchical): after one failed, the ranks no longer agree on which collective
// comes next, so the communicator is unusable for good. Not thread-safe.
class FirstError {
 public:
  // Runs `collective`; records its error if it is the first, and rethrows it.
  template <typename F>
  void Guard(F&& collective) {
    try {
      collective();
    } catch (const std::exception& e) {
      if (message_.empty()) message_ = ErrorMessage(e);
      throw;
    }
  }

  // After an error: throws "<where>: communicator is unusable after an earlier error: <it>".
  void CheckUsable(const std::string& where) const;

  // The first error's message; empty while there was none.
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

}  // namespace ember::sdk

#endif  // EMBER_SDK_SYNC_COMMUNICATOR_ARGS_H_
