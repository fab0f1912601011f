// CUDA runtime errors in the GPU benchmarks (h2d_bench, nccl_bench): one message format
// and a check that throws. CUDA configuration only.
#ifndef EMBER_BENCH_CUDA_CHECK_H_
#define EMBER_BENCH_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <string>

namespace ember::bench {

// "<error name>: <error string>", e.g. "cudaErrorNoDevice: no CUDA-capable device is detected".
std::string CudaMessage(cudaError_t error);

// Throws ember::examples::Fatal "<what>: <CudaMessage(error)>" unless `error` is cudaSuccess.
void CheckCuda(cudaError_t error, const std::string& what);

}  // namespace ember::bench

#endif  // EMBER_BENCH_CUDA_CHECK_H_
