// What the GPU benchmarks (h2d_bench, nccl_bench) share: CUDA runtime errors (one
// message format and a check that throws), the skip when no GPU is visible (exit 77),
// and their unit of sizes. CUDA configuration only.
#ifndef EMBER_BENCH_CUDA_CHECK_H_
#define EMBER_BENCH_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ember::bench {

// The exit status of a GPU benchmark that sees no CUDA device: a skip (nothing measured),
// not an error.
inline constexpr int kExitNoGpu = 77;

inline constexpr uint64_t kMiB = uint64_t{1} << 20;

// "<error name>: <error string>", e.g. "cudaErrorNoDevice: no CUDA-capable device is detected".
std::string CudaMessage(cudaError_t error);

// Throws ember::examples::Fatal "<what>: <CudaMessage(error)>" unless `error` is cudaSuccess.
void CheckCuda(cudaError_t error, const std::string& what);

// No CUDA device is visible to this process.
struct NoGpu : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The number of CUDA devices this process sees (>= 1). Throws NoGpu
// "cudaGetDeviceCount: <CudaMessage>" or "cudaGetDeviceCount: 0 devices" when there is none.
int VisibleDevices();

// Prints "<program>: SKIP: no CUDA device visible (<why>); nothing measured" on stdout and
// returns kExitNoGpu.
int SkipNoGpu(const char* program, const NoGpu& no_gpu);

}  // namespace ember::bench

#endif  // EMBER_BENCH_CUDA_CHECK_H_
