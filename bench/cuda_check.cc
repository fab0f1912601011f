#include "bench/cuda_check.h"

#include <cstdio>

#include "sdk/examples/program_main.h"

namespace ember::bench {

std::string CudaMessage(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

void CheckCuda(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) throw examples::Fatal(what + ": " + CudaMessage(error));
}

int VisibleDevices() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    throw NoGpu("cudaGetDeviceCount: " + CudaMessage(error));
  }
  if (count == 0) throw NoGpu("cudaGetDeviceCount: 0 devices");
  return count;
}

int SkipNoGpu(const char* program, const NoGpu& no_gpu) {
  std::printf("%s: SKIP: no CUDA device visible (%s); nothing measured\n", program, no_gpu.what());
  return kExitNoGpu;
}

}  // namespace ember::bench
