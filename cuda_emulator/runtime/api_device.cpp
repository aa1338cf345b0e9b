// Device queries of the emulated runtime. The emulated device reports
// itself as an sm_90 part with an H200's limits (shared memory per block,
// threads, SMs), so that the engine takes the code paths it takes on the
// GPU it targets, tensor-core kernels included; its memory is
// SDP_CUDA_EMULATOR_MEMORY.
#include <cuda_runtime_api.h>

#include <cstring>

#include "cuda_emulator/runtime/api_state.h"
#include "cuda_emulator/runtime/device_memory.h"
#include "cuda_emulator/runtime/emulator_config.h"
#include "cuda_emulator/runtime/emulated_limits.h"

using sdp::emu::note_status;

namespace {

bool valid_device(int device) { return device >= 0 && device < sdp::emu::config().device_count; }

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return note_status(cudaErrorInvalidValue);
  *count = sdp::emu::config().device_count;
  // As the real runtime answers on a machine without a GPU.
  if (*count == 0) return note_status(cudaErrorNoDevice);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return note_status(cudaErrorInvalidValue);
  *device = sdp::emu::current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (sdp::emu::config().device_count == 0) return note_status(cudaErrorNoDevice);
  if (!valid_device(device)) {
    sdp::emu::say("cudaSetDevice(%d): the emulator has devices 0..%d (SDP_CUDA_EMULATOR_DEVICES)",
                  device, sdp::emu::config().device_count - 1);
    return note_status(cudaErrorInvalidDevice);
  }
  sdp::emu::set_current_device(device);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return note_status(cudaErrorInvalidValue);
  if (!valid_device(device)) return note_status(cudaErrorInvalidDevice);
  namespace lim = sdp::emu::limits;
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "sdp emulated CUDA device (sm_90, H200 limits)", sizeof prop->name - 1);
  prop->totalGlobalMem = sdp::emu::device_capacity(device);
  prop->sharedMemPerBlock = lim::kDefaultDynamicShared;
  prop->sharedMemPerBlockOptin = lim::kMaxDynamicSharedOptIn;
  prop->sharedMemPerMultiprocessor = 233472;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = lim::kMaxThreadsPerBlock;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = lim::kMultiprocessors;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 6144;
  prop->pciDeviceID = device;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return note_status(cudaErrorInvalidValue);
  if (!valid_device(device)) return note_status(cudaErrorInvalidDevice);
  namespace lim = sdp::emu::limits;
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = lim::kMaxDynamicSharedOptIn; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = lim::kDefaultDynamicShared; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = lim::kMultiprocessors; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = lim::kMaxThreadsPerBlock; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    default:
      sdp::emu::say("cudaDeviceGetAttribute: attribute %d is not emulated (emulated: compute "
                    "capability, shared memory per block, multiprocessors, threads per block, warp size)",
                    static_cast<int>(attr));
      return note_status(cudaErrorInvalidValue);
  }
}

cudaError_t cudaDeviceReset() {
  sdp::emu::say("cudaDeviceReset is not emulated: it would free memory the engine still holds");
  return note_status(cudaErrorNotSupported);
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return note_status(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return note_status(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

}  // extern "C"
