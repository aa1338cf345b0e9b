// The emulated cuDNN's handle (it only remembers the stream its work goes
// to), status names, and the shared refusal report.
#include <cstdio>
#include <new>
#include <string>

#include "cuda_emulator/cudnn/cudnn_emu.h"

namespace sdp::emu::cudnn {

// Never destroyed: a thread-exit destructor (cudnn_handle.cpp's) may still
// destroy its handle after static destructors have run.
Registry<cudnnContext>& handles() {
  static auto* registry = new Registry<cudnnContext>();
  return *registry;
}

cudnnStatus_t refuse(cudnnStatus_t status, const char* call, const std::string& what) {
  std::fprintf(stderr, "sdp cudnn emulator: %s: %s (%s)\n", call, what.c_str(),
               cudnnGetErrorString(status));
  return status;
}

cudnnStatus_t check_handle(const char* call, const cudnnContext* handle) {
  if (handle == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "handle is NULL");
  if (!handles().contains(handle))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "handle was not created by cudnnCreate or was already destroyed");
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace sdp::emu::cudnn

using sdp::emu::cudnn::check_handle;
using sdp::emu::cudnn::handles;
using sdp::emu::cudnn::refuse;

extern "C" {

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnCreate", "the handle pointer is NULL");
  auto* created = new (std::nothrow) cudnnContext();
  if (created == nullptr)
    return refuse(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "cudnnCreate",
                  "out of host memory");
  handles().add(created);
  *handle = created;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle) {
  if (const cudnnStatus_t status = check_handle("cudnnDestroy", handle);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  // Work already queued keeps running: it holds copies, never the handle.
  handles().remove(handle);
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  if (const cudnnStatus_t status = check_handle("cudnnSetStream", handle);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

// The enumerator's own name, as the real library returns it.
const char* CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
  switch (static_cast<int>(status)) {
#define SDP_CUDNN_STATUS_NAME(name) \
  case name:                        \
    return #name;
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_SUCCESS)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_INITIALIZED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_DEPRECATED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_LICENSE_ERROR)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_INVALID_VALUE)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
    SDP_CUDNN_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
#undef SDP_CUDNN_STATUS_NAME
  }
  return "CUDNN_UNKNOWN_STATUS_FOUND";
}

}  // extern "C"
