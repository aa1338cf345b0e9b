#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_info.h"

namespace sdp::cuda {

DeviceReport query_devices() {
  DeviceReport r;
  const cudaError_t status = cudaGetDeviceCount(&r.device_count);
  if (status != cudaSuccess) {
    r.device_count = 0;
    r.reason = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error so later queries start clean
    return r;
  }
  if (r.device_count == 0) {
    r.reason = "the driver reports no CUDA devices";
    return r;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  r.name = prop.name;
  r.compute_major = prop.major;
  r.compute_minor = prop.minor;
  r.total_bytes = prop.totalGlobalMem;
  return r;
}

void require_device(int index) {
  const DeviceReport r = query_devices();
  if (r.device_count == 0)
    fail("--device cuda was requested but no GPU is usable (", r.reason,
         "); run with --device cpu, or --device meta for a dry run");
  if (index < 0 || index >= r.device_count)
    fail("CUDA device ", index, " does not exist: this machine has ", r.device_count,
         " (valid: 0..", r.device_count - 1, ")");
}

}  // namespace sdp::cuda
