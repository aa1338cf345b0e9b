// Tensor, filter and convolution descriptors of the emulated cuDNN. The
// setters accept what kernels/cuda/conv2d.cpp builds (packed 4-d NCHW
// tensors, KCRS filters, 2-d cross-correlation computed in f32, f32 or bf16
// data) and refuse everything else before any work is queued: an invalid
// value with CUDNN_STATUS_BAD_PARAM (as cuDNN documents), a valid one the
// emulator does not implement with CUDNN_STATUS_NOT_SUPPORTED. A refused
// setter leaves the descriptor as it was.
#include <climits>
#include <cstdint>
#include <new>
#include <sstream>
#include <string>

#include "cuda_emulator/cudnn/cudnn_emu.h"

namespace sdp::emu::cudnn {

// Never destroyed, like handles(): descriptors may be destroyed at thread exit.
Registry<cudnnTensorStruct>& tensors() {
  static auto* registry = new Registry<cudnnTensorStruct>();
  return *registry;
}
Registry<cudnnFilterStruct>& filters() {
  static auto* registry = new Registry<cudnnFilterStruct>();
  return *registry;
}
Registry<cudnnConvolutionStruct>& convolutions() {
  static auto* registry = new Registry<cudnnConvolutionStruct>();
  return *registry;
}

std::string data_type_name(cudnnDataType_t type) {
  switch (type) {
    case CUDNN_DATA_FLOAT:
      return "CUDNN_DATA_FLOAT";
    case CUDNN_DATA_DOUBLE:
      return "CUDNN_DATA_DOUBLE";
    case CUDNN_DATA_HALF:
      return "CUDNN_DATA_HALF";
    case CUDNN_DATA_INT8:
      return "CUDNN_DATA_INT8";
    case CUDNN_DATA_INT32:
      return "CUDNN_DATA_INT32";
    case CUDNN_DATA_UINT8:
      return "CUDNN_DATA_UINT8";
    case CUDNN_DATA_BFLOAT16:
      return "CUDNN_DATA_BFLOAT16";
    case CUDNN_DATA_INT64:
      return "CUDNN_DATA_INT64";
    case CUDNN_DATA_FP8_E4M3:
      return "CUDNN_DATA_FP8_E4M3";
    case CUDNN_DATA_FP8_E5M2:
      return "CUDNN_DATA_FP8_E5M2";
    default:
      return "data type " + std::to_string(static_cast<int>(type));
  }
}

std::string format_name(cudnnTensorFormat_t format) {
  switch (format) {
    case CUDNN_TENSOR_NCHW:
      return "CUDNN_TENSOR_NCHW";
    case CUDNN_TENSOR_NHWC:
      return "CUDNN_TENSOR_NHWC";
    case CUDNN_TENSOR_NCHW_VECT_C:
      return "CUDNN_TENSOR_NCHW_VECT_C";
  }
  return "format " + std::to_string(static_cast<int>(format));
}

namespace {

// The enumerators of cudnnDataType_t in cuDNN 9 run from 0 to
// CUDNN_DATA_COMPLEX_FP64; a value outside is not a data type at all.
bool is_data_type(cudnnDataType_t type) {
  const int v = static_cast<int>(type);
  return v >= 0 && v <= static_cast<int>(CUDNN_DATA_COMPLEX_FP64);
}

constexpr const char* kSupportedTypes =
    "the emulator supports CUDNN_DATA_FLOAT and CUDNN_DATA_BFLOAT16";

// Shared by the tensor and filter setters: the data type, the layout and
// four extents, each > 0, at most INT_MAX elements in all (cuDNN's limit).
cudnnStatus_t check_4d(const char* call, cudnnTensorFormat_t format, cudnnDataType_t type,
                       const int (&dims)[4], const char* const (&names)[4]) {
  if (!is_data_type(type))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  data_type_name(type) + " is not a cudnnDataType_t value");
  if (type != CUDNN_DATA_FLOAT && type != CUDNN_DATA_BFLOAT16)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, call,
                  data_type_name(type) + " is not supported; " + kSupportedTypes);
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC &&
      format != CUDNN_TENSOR_NCHW_VECT_C)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  format_name(format) + " is not a cudnnTensorFormat_t value");
  if (format != CUDNN_TENSOR_NCHW)
    return refuse(
        CUDNN_STATUS_NOT_SUPPORTED, call,
        format_name(format) + " is not supported; the emulator supports CUDNN_TENSOR_NCHW only");
  int64_t elements = 1;
  for (int i = 0; i < 4; ++i) {
    if (dims[i] <= 0)
      return refuse(CUDNN_STATUS_BAD_PARAM, call,
                    std::string(names[i]) + " = " + std::to_string(dims[i]) +
                        "; every extent must be at least 1");
    elements *= dims[i];
  }
  if (elements > INT_MAX)
    return refuse(
        CUDNN_STATUS_NOT_SUPPORTED, call,
        std::to_string(elements) + " elements exceed cuDNN's limit of " + std::to_string(INT_MAX));
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

cudnnStatus_t check_tensor(const char* call, const char* role, const cudnnTensorStruct* desc) {
  if (desc == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, std::string(role) + " is NULL");
  if (!tensors().contains(desc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  std::string(role) +
                      " was not created by cudnnCreateTensorDescriptor or was already destroyed");
  if (!desc->set)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  std::string(role) + " was never set (cudnnSetTensor4dDescriptor)");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_filter(const char* call, const char* role, const cudnnFilterStruct* desc) {
  if (desc == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, std::string(role) + " is NULL");
  if (!filters().contains(desc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  std::string(role) +
                      " was not created by cudnnCreateFilterDescriptor or was already destroyed");
  if (!desc->set)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  std::string(role) + " was never set (cudnnSetFilter4dDescriptor)");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_convolution(const char* call, const char* role,
                                const cudnnConvolutionStruct* desc) {
  if (desc == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, std::string(role) + " is NULL");
  if (!convolutions().contains(desc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  std::string(role) +
                      " was not created by cudnnCreateConvolutionDescriptor or was already "
                      "destroyed");
  if (!desc->set)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  std::string(role) + " was never set (cudnnSetConvolution2dDescriptor)");
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace sdp::emu::cudnn

namespace emu = sdp::emu::cudnn;
using emu::refuse;

namespace {

template <typename T, typename Out>
cudnnStatus_t create_descriptor(const char* call, emu::Registry<T>& registry, Out* out) {
  if (out == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "the descriptor pointer is NULL");
  T* created = new (std::nothrow) T();
  if (created == nullptr)
    return refuse(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, call, "out of host memory");
  registry.add(created);
  *out = created;
  return CUDNN_STATUS_SUCCESS;
}

// NULL is a no-op, as in cuDNN; a pointer this library does not know is refused.
template <typename T>
cudnnStatus_t destroy_descriptor(const char* call, emu::Registry<T>& registry, T* desc) {
  if (desc == nullptr) return CUDNN_STATUS_SUCCESS;
  if (!registry.remove(desc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "the descriptor was not created by this library or was already destroyed");
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

// ---- tensors ------------------------------------------------------------------

cudnnStatus_t CUDNNWINAPI cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  return create_descriptor("cudnnCreateTensorDescriptor", emu::tensors(), tensorDesc);
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  return destroy_descriptor("cudnnDestroyTensorDescriptor", emu::tensors(), tensorDesc);
}

cudnnStatus_t CUDNNWINAPI cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                                     cudnnTensorFormat_t format,
                                                     cudnnDataType_t dataType, int n, int c, int h,
                                                     int w) {
  constexpr const char* call = "cudnnSetTensor4dDescriptor";
  if (tensorDesc == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "tensorDesc is NULL");
  if (!emu::tensors().contains(tensorDesc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "tensorDesc was not created by cudnnCreateTensorDescriptor or was destroyed");
  const int dims[4] = {n, c, h, w};
  const char* const names[4] = {"n", "c", "h", "w"};
  if (const cudnnStatus_t status = emu::check_4d(call, format, dataType, dims, names);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  *tensorDesc = cudnnTensorStruct{true, dataType, n, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

// Not called by the engine: only its 4-d fully packed NCHW case (what
// cudnnSetTensor4dDescriptor describes) is accepted, so that another rank or
// a strided view is refused by name rather than computed wrongly.
cudnnStatus_t CUDNNWINAPI cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                                     cudnnDataType_t dataType, int nbDims,
                                                     const int dimA[], const int strideA[]) {
  constexpr const char* call = "cudnnSetTensorNdDescriptor";
  if (dimA == nullptr || strideA == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "dimA or strideA is NULL");
  if (nbDims != 4)
    return refuse(
        CUDNN_STATUS_NOT_SUPPORTED, call,
        "nbDims = " + std::to_string(nbDims) + "; the emulator supports 4-d tensors only");
  const bool extents_valid = dimA[0] > 0 && dimA[1] > 0 && dimA[2] > 0 && dimA[3] > 0;
  const int64_t packed[4] = {int64_t{dimA[1]} * dimA[2] * dimA[3], int64_t{dimA[2]} * dimA[3],
                             dimA[3], 1};
  // Invalid extents are the 4-d setter's to refuse (BAD_PARAM), strides aside.
  for (int i = 0; i < 4 && extents_valid; ++i)
    if (strideA[i] != packed[i]) {
      std::ostringstream what;
      what << "strideA[" << i << "] = " << strideA[i] << " where a packed NCHW tensor has "
           << packed[i] << "; the emulator supports fully packed NCHW tensors only";
      return refuse(CUDNN_STATUS_NOT_SUPPORTED, call, what.str());
    }
  return cudnnSetTensor4dDescriptor(tensorDesc, CUDNN_TENSOR_NCHW, dataType, dimA[0], dimA[1],
                                    dimA[2], dimA[3]);
}

// ---- filters ------------------------------------------------------------------

cudnnStatus_t CUDNNWINAPI cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  return create_descriptor("cudnnCreateFilterDescriptor", emu::filters(), filterDesc);
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  return destroy_descriptor("cudnnDestroyFilterDescriptor", emu::filters(), filterDesc);
}

cudnnStatus_t CUDNNWINAPI cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                                     cudnnDataType_t dataType,
                                                     cudnnTensorFormat_t format, int k, int c,
                                                     int h, int w) {
  constexpr const char* call = "cudnnSetFilter4dDescriptor";
  if (filterDesc == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "filterDesc is NULL");
  if (!emu::filters().contains(filterDesc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "filterDesc was not created by cudnnCreateFilterDescriptor or was destroyed");
  const int dims[4] = {k, c, h, w};
  const char* const names[4] = {"k", "c", "h", "w"};
  if (const cudnnStatus_t status = emu::check_4d(call, format, dataType, dims, names);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  *filterDesc = cudnnFilterStruct{true, dataType, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

// Not called by the engine: the 4-d case only (a 2-d convolution's filter).
cudnnStatus_t CUDNNWINAPI cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t filterDesc,
                                                     cudnnDataType_t dataType,
                                                     cudnnTensorFormat_t format, int nbDims,
                                                     const int filterDimA[]) {
  constexpr const char* call = "cudnnSetFilterNdDescriptor";
  if (filterDimA == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "filterDimA is NULL");
  if (nbDims != 4)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, call,
                  "nbDims = " + std::to_string(nbDims) +
                      "; the emulator supports 4-d filters (2-d convolutions) only");
  return cudnnSetFilter4dDescriptor(filterDesc, dataType, format, filterDimA[0], filterDimA[1],
                                    filterDimA[2], filterDimA[3]);
}

// ---- convolutions ---------------------------------------------------------------

cudnnStatus_t CUDNNWINAPI cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  return create_descriptor("cudnnCreateConvolutionDescriptor", emu::convolutions(), convDesc);
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  return destroy_descriptor("cudnnDestroyConvolutionDescriptor", emu::convolutions(), convDesc);
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc,
                                                          int pad_h, int pad_w, int u, int v,
                                                          int dilation_h, int dilation_w,
                                                          cudnnConvolutionMode_t mode,
                                                          cudnnDataType_t computeType) {
  constexpr const char* call = "cudnnSetConvolution2dDescriptor";
  if (convDesc == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "convDesc is NULL");
  if (!emu::convolutions().contains(convDesc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "convDesc was not created by cudnnCreateConvolutionDescriptor or was destroyed");
  std::ostringstream what;
  if (pad_h < 0 || pad_w < 0) {
    what << "padding (" << pad_h << ", " << pad_w << ") is negative; padding must be >= 0";
    return refuse(CUDNN_STATUS_BAD_PARAM, call, what.str());
  }
  if (u <= 0 || v <= 0) {
    what << "stride (" << u << ", " << v << ") must be >= 1";
    return refuse(CUDNN_STATUS_BAD_PARAM, call, what.str());
  }
  if (dilation_h <= 0 || dilation_w <= 0) {
    what << "dilation (" << dilation_h << ", " << dilation_w << ") must be >= 1";
    return refuse(CUDNN_STATUS_BAD_PARAM, call, what.str());
  }
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) {
    what << "mode " << static_cast<int>(mode) << " is not a cudnnConvolutionMode_t value";
    return refuse(CUDNN_STATUS_BAD_PARAM, call, what.str());
  }
  if (mode != CUDNN_CROSS_CORRELATION)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, call,
                  "mode CUDNN_CONVOLUTION (flipped filter) is not supported; the emulator "
                  "supports CUDNN_CROSS_CORRELATION only");
  if (!emu::is_data_type(computeType))
    return refuse(
        CUDNN_STATUS_BAD_PARAM, call,
        "computeType " + emu::data_type_name(computeType) + " is not a cudnnDataType_t value");
  if (computeType != CUDNN_DATA_FLOAT)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, call,
                  "computeType " + emu::data_type_name(computeType) +
                      " is not supported; the emulator computes in CUDNN_DATA_FLOAT only");
  // The math type and group count are kept: cuDNN sets them by their own calls.
  convDesc->set = true;
  convDesc->pad_h = pad_h;
  convDesc->pad_w = pad_w;
  convDesc->stride_h = u;
  convDesc->stride_w = v;
  convDesc->dilation_h = dilation_h;
  convDesc->dilation_w = dilation_w;
  convDesc->mode = mode;
  convDesc->compute_type = computeType;
  return CUDNN_STATUS_SUCCESS;
}

// Not called by the engine: the 2-d case only.
cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t convDesc,
                                                          int arrayLength, const int padA[],
                                                          const int filterStrideA[],
                                                          const int dilationA[],
                                                          cudnnConvolutionMode_t mode,
                                                          cudnnDataType_t computeType) {
  constexpr const char* call = "cudnnSetConvolutionNdDescriptor";
  if (padA == nullptr || filterStrideA == nullptr || dilationA == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "padA, filterStrideA or dilationA is NULL");
  if (arrayLength != 2)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, call,
                  "arrayLength = " + std::to_string(arrayLength) +
                      "; the emulator supports 2-d convolutions only");
  return cudnnSetConvolution2dDescriptor(convDesc, padA[0], padA[1], filterStrideA[0],
                                         filterStrideA[1], dilationA[0], dilationA[1], mode,
                                         computeType);
}

// Any math type is accepted and recorded; the emulator computes in f32 under
// all of them (a TF32 or fp16 down-conversion is something cuDNN may do under
// some, never something it must do).
cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                                      cudnnMathType_t mathType) {
  constexpr const char* call = "cudnnSetConvolutionMathType";
  if (convDesc == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "convDesc is NULL");
  if (!emu::convolutions().contains(convDesc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "convDesc was not created by cudnnCreateConvolutionDescriptor or was destroyed");
  if (mathType != CUDNN_DEFAULT_MATH && mathType != CUDNN_TENSOR_OP_MATH &&
      mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && mathType != CUDNN_FMA_MATH)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "mathType " + std::to_string(static_cast<int>(mathType)) +
                      " is not a cudnnMathType_t value");
  convDesc->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

// Not called by the engine: grouped convolutions are not emulated, so only
// the default of one group is accepted.
cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc,
                                                        int groupCount) {
  constexpr const char* call = "cudnnSetConvolutionGroupCount";
  if (convDesc == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "convDesc is NULL");
  if (!emu::convolutions().contains(convDesc))
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "convDesc was not created by cudnnCreateConvolutionDescriptor or was destroyed");
  if (groupCount < 1)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "groupCount = " + std::to_string(groupCount) + " must be >= 1");
  if (groupCount != 1)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, call,
                  "groupCount = " + std::to_string(groupCount) +
                      "; the emulator supports ungrouped convolutions (groupCount 1) only");
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
