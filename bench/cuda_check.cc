#include "bench/cuda_check.h"

#include "sdk/examples/program_main.h"

namespace ember::bench {

std::string CudaMessage(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

void CheckCuda(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) throw examples::Fatal(what + ": " + CudaMessage(error));
}

}  // namespace ember::bench
