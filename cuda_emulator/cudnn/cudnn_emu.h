#pragma once
// Internals of the emulated cuDNN: the structs behind cuDNN's opaque handle
// and descriptor pointers, the registry that tells a live descriptor from a
// stale or foreign pointer, and the one way a call reports a refusal.
//
// Only the convolution subset kernels/cuda/conv2d.cpp and cudnn_handle.cpp
// call is emulated: 4-d NCHW tensors, KCRS filters, 2-d cross-correlation
// with f32 compute, data in CUDNN_DATA_FLOAT or CUDNN_DATA_BFLOAT16. Anything
// else is refused with the status cuDNN documents and one line on stderr.
#include "cuda_emulator/runtime/live_objects.h"
#include <cudnn.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

// The opaque types cudnn.h declares (typedef struct cudnnXxx *cudnnXxx_t),
// defined here. A descriptor is plain data: a call copies what it needs, so
// the caller may destroy it as soon as the call returns.
struct cudnnContext {
  cudaStream_t stream = nullptr;  // cudnnSetStream; 0 is the legacy default stream
};

struct cudnnTensorStruct {
  bool set = false;  // false until a Set call succeeds
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0;  // fully packed NCHW
};

struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int k = 0, c = 0, r = 0, s = 0;  // fully packed KCRS
};

struct cudnnConvolutionStruct {
  bool set = false;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute_type = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // cuDNN's default for a new descriptor
};

namespace sdp::emu::cudnn {

// Live handles and descriptors (cuda_emulator/runtime/live_objects.h).
template <typename T>
using Registry = LiveObjects<T>;

Registry<cudnnContext>& handles();
Registry<cudnnTensorStruct>& tensors();
Registry<cudnnFilterStruct>& filters();
Registry<cudnnConvolutionStruct>& convolutions();

// Writes "sdp cudnn emulator: <call>: <what> (<status name>)" to stderr as
// one line and returns `status`, for `return refuse(...)` at the refusal.
cudnnStatus_t refuse(cudnnStatus_t status, const char* call, const std::string& what);

// Names for messages: "CUDNN_DATA_BFLOAT16", "CUDNN_TENSOR_NHWC", or the
// number when the value is outside the enum.
std::string data_type_name(cudnnDataType_t type);
std::string format_name(cudnnTensorFormat_t format);

// Checks that a descriptor argument is a live one of this library and has
// been set; names the argument (`role`, e.g. "xDesc") when it is not.
cudnnStatus_t check_tensor(const char* call, const char* role, const cudnnTensorStruct* desc);
cudnnStatus_t check_filter(const char* call, const char* role, const cudnnFilterStruct* desc);
cudnnStatus_t check_convolution(const char* call, const char* role,
                                const cudnnConvolutionStruct* desc);
cudnnStatus_t check_handle(const char* call, const cudnnContext* handle);

// Element size in bytes of the two supported data types.
inline int64_t element_bytes(cudnnDataType_t type) { return type == CUDNN_DATA_BFLOAT16 ? 2 : 4; }

}  // namespace sdp::emu::cudnn
