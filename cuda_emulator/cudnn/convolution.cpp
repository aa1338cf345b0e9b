// The convolution calls of the emulated cuDNN: output extents, algorithm
// queries, workspace sizes, and the three passes, queued in stream order.
//
// Algorithms. Every emulated algorithm computes the same way (conv_compute.h);
// they differ in whether the caller's workspace holds the column matrix:
//   forward          1 IMPLICIT_PRECOMP_GEMM  workspace = columns, deterministic
//                    0 IMPLICIT_GEMM          workspace = 0,       deterministic
//   backward data    1 ALGO_1                 workspace = columns, deterministic
//                    0 ALGO_0                 workspace = 0,       reported non-deterministic
//   backward filter  1 ALGO_1                 workspace = columns, deterministic
//                    0 ALGO_0                 workspace = 0,       reported non-deterministic
// where columns = c * r * s * out_h * out_w * sizeof(float) bytes: one image's
// im2col matrix in f32, the compute type, whatever the storage type. (ALGO_0
// is computed deterministically too; it is reported as cuDNN documents it so
// that a caller never comes to rely on it.) The *_v7 queries list these first
// with CUDNN_STATUS_SUCCESS, then every other algorithm of the enum with
// CUDNN_STATUS_NOT_SUPPORTED, as cuDNN lists what it cannot run; a call with
// one of those is refused with NOT_SUPPORTED, one outside the enum with
// BAD_PARAM.
//
// Each perf entry's mathType is CUDNN_FMA_MATH for f32 data (the emulator
// never rounds operands to TF32) and the descriptor's math type for bf16.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <sstream>
#include <string>
#include <utility>

#include "cuda_emulator/cudnn/conv_compute.h"
#include "cuda_emulator/cudnn/cudnn_emu.h"
#include "cuda_emulator/runtime/stream_work.h"

namespace sdp::emu::cudnn {
namespace {

enum class Pass { forward, backward_data, backward_filter };

struct Algo {
  int id = 0;
  bool uses_columns = false;  // the workspace holds one image's column matrix
  cudnnDeterminism_t determinism = CUDNN_DETERMINISTIC;
};

constexpr Algo kForwardAlgos[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, CUDNN_DETERMINISTIC},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, false, CUDNN_DETERMINISTIC},
};
constexpr Algo kBackwardDataAlgos[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, CUDNN_DETERMINISTIC},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false, CUDNN_NON_DETERMINISTIC},
};
constexpr Algo kBackwardFilterAlgos[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, CUDNN_DETERMINISTIC},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false, CUDNN_NON_DETERMINISTIC},
};

struct PassInfo {
  int algo_count = 0;           // the enum's *_ALGO_COUNT
  const char* algo_type = "";   // for messages
  const char* emulated = "";    // for messages
  std::span<const Algo> algos;  // in the order the _v7 query lists them
};

PassInfo info(Pass pass) {
  switch (pass) {
    case Pass::forward:
      return {CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "cudnnConvolutionFwdAlgo_t",
              "1 (IMPLICIT_PRECOMP_GEMM) and 0 (IMPLICIT_GEMM)", kForwardAlgos};
    case Pass::backward_data:
      return {CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, "cudnnConvolutionBwdDataAlgo_t",
              "1 (ALGO_1) and 0 (ALGO_0)", kBackwardDataAlgos};
    case Pass::backward_filter:
      return {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, "cudnnConvolutionBwdFilterAlgo_t",
              "1 (ALGO_1) and 0 (ALGO_0)", kBackwardFilterAlgos};
  }
  return {};
}

// The names the calls give their descriptor parameters, for messages. x is
// the activation side (x, or dx), y the output side (y, or dy).
struct Roles {
  const char* x = "xDesc";
  const char* w = "wDesc";
  const char* conv = "convDesc";
  const char* y = "yDesc";
};

std::string dims(int64_t a, int64_t b, int64_t c, int64_t d) {
  std::ostringstream s;
  s << "[" << a << ", " << b << ", " << c << ", " << d << "]";
  return s.str();
}

std::string geometry(const cudnnConvolutionStruct& conv) {
  std::ostringstream s;
  s << "padding (" << conv.pad_h << ", " << conv.pad_w << "), stride (" << conv.stride_h << ", "
    << conv.stride_w << "), dilation (" << conv.dilation_h << ", " << conv.dilation_w << ")";
  return s.str();
}

// The output extents cuDNN derives from x, w and conv:
// (h + 2 pad - dilation (r - 1) - 1) / stride + 1. BAD_PARAM when the channel
// counts differ or the dilated filter is larger than the padded input.
cudnnStatus_t output_extents(const char* call, const Roles& roles, const cudnnTensorStruct& x,
                             const cudnnFilterStruct& w, const cudnnConvolutionStruct& conv,
                             int64_t& out_h, int64_t& out_w) {
  if (x.c != w.c) {
    std::ostringstream what;
    what << roles.x << " " << dims(x.n, x.c, x.h, x.w) << " has " << x.c << " channels where "
         << roles.w << " " << dims(w.k, w.c, w.r, w.s) << " has " << w.c
         << "; they must be equal (the emulator supports groupCount 1 only)";
    return refuse(CUDNN_STATUS_BAD_PARAM, call, what.str());
  }
  const int64_t span_h = int64_t{conv.dilation_h} * (w.r - 1) + 1;
  const int64_t span_w = int64_t{conv.dilation_w} * (w.s - 1) + 1;
  const int64_t padded_h = int64_t{x.h} + 2 * int64_t{conv.pad_h};
  const int64_t padded_w = int64_t{x.w} + 2 * int64_t{conv.pad_w};
  if (span_h > padded_h || span_w > padded_w) {
    std::ostringstream what;
    what << "the dilated filter spans " << span_h << " x " << span_w << " but the padded input "
         << roles.x << " " << dims(x.n, x.c, x.h, x.w) << " with " << geometry(conv) << " is "
         << padded_h << " x " << padded_w << "; the output would be empty";
    return refuse(CUDNN_STATUS_BAD_PARAM, call, what.str());
  }
  out_h = (padded_h - span_h) / conv.stride_h + 1;
  out_w = (padded_w - span_w) / conv.stride_w + 1;
  return CUDNN_STATUS_SUCCESS;
}

// Validates the four descriptors of one pass and gives its extents: all
// live and set, one data type, y's shape the one x, w and conv produce.
cudnnStatus_t make_shape(const char* call, const Roles& roles, const cudnnTensorStruct* x,
                         const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                         const cudnnTensorStruct* y, ConvShape& p) {
  cudnnStatus_t status = check_tensor(call, roles.x, x);
  if (status == CUDNN_STATUS_SUCCESS) status = check_filter(call, roles.w, w);
  if (status == CUDNN_STATUS_SUCCESS) status = check_convolution(call, roles.conv, conv);
  if (status == CUDNN_STATUS_SUCCESS) status = check_tensor(call, roles.y, y);
  if (status != CUDNN_STATUS_SUCCESS) return status;
  if (x->type != w->type || x->type != y->type) {
    std::ostringstream what;
    what << "data types differ: " << roles.x << " " << data_type_name(x->type) << ", " << roles.w
         << " " << data_type_name(w->type) << ", " << roles.y << " " << data_type_name(y->type)
         << "; the emulator supports all CUDNN_DATA_FLOAT or all CUDNN_DATA_BFLOAT16 (computed "
            "in f32)";
    return refuse(CUDNN_STATUS_BAD_PARAM, call, what.str());
  }
  int64_t out_h = 0, out_w = 0;
  status = output_extents(call, roles, *x, *w, *conv, out_h, out_w);
  if (status != CUDNN_STATUS_SUCCESS) return status;
  if (y->n != x->n || y->c != w->k || y->h != out_h || y->w != out_w) {
    std::ostringstream what;
    what << roles.y << " is " << dims(y->n, y->c, y->h, y->w) << " but " << roles.x << " "
         << dims(x->n, x->c, x->h, x->w) << " and " << roles.w << " "
         << dims(w->k, w->c, w->r, w->s) << " with " << geometry(*conv) << " give "
         << dims(x->n, w->k, out_h, out_w);
    return refuse(CUDNN_STATUS_BAD_PARAM, call, what.str());
  }
  p = ConvShape{};
  p.n = x->n;
  p.c = x->c;
  p.h = x->h;
  p.w = x->w;
  p.k = w->k;
  p.r = w->r;
  p.s = w->s;
  p.out_h = out_h;
  p.out_w = out_w;
  p.pad_h = conv->pad_h;
  p.pad_w = conv->pad_w;
  p.stride_h = conv->stride_h;
  p.stride_w = conv->stride_w;
  p.dilation_h = conv->dilation_h;
  p.dilation_w = conv->dilation_w;
  p.type = x->type;
  return CUDNN_STATUS_SUCCESS;
}

const Algo* find_algo(Pass pass, int algo) {
  for (const Algo& a : info(pass).algos)
    if (a.id == algo) return &a;
  return nullptr;
}

size_t algo_workspace(const Algo& algo, const ConvShape& p) {
  return algo.uses_columns ? static_cast<size_t>(p.column_elements()) * sizeof(float) : 0;
}

// The emulated algorithm `algo` names: BAD_PARAM outside the enum,
// NOT_SUPPORTED for one the emulator does not implement.
cudnnStatus_t lookup_algo(const char* call, Pass pass, int algo, const Algo*& found) {
  const PassInfo pi = info(pass);
  if (algo < 0 || algo >= pi.algo_count)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "algo " + std::to_string(algo) + " is not a " + pi.algo_type + " value (0 to " +
                      std::to_string(pi.algo_count - 1) + ")");
  found = find_algo(pass, algo);
  if (found == nullptr)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, call,
                  "algo " + std::to_string(algo) + " is not emulated; the emulator implements " +
                      pi.emulated + " (listed by the _v7 query)");
  return CUDNN_STATUS_SUCCESS;
}

cudnnMathType_t reported_math(const ConvShape& p, const cudnnConvolutionStruct& conv) {
  return p.type == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : conv.math;
}

template <typename Perf, typename AlgoEnum>
cudnnStatus_t list_algorithms(const char* call, Pass pass, cudnnContext* handle, const Roles& roles,
                              const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                              const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                              int requested, int* returned, Perf* results) {
  if (const cudnnStatus_t status = check_handle(call, handle); status != CUDNN_STATUS_SUCCESS)
    return status;
  if (returned == nullptr || results == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "returnedAlgoCount or perfResults is NULL");
  if (requested <= 0)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "requestedAlgoCount = " + std::to_string(requested) + " must be >= 1");
  ConvShape p;
  if (const cudnnStatus_t status = make_shape(call, roles, x, w, conv, y, p);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  int count = 0;
  auto put = [&](int algo, cudnnStatus_t status, size_t memory, cudnnDeterminism_t determinism) {
    if (count >= requested) return;
    Perf perf{};
    perf.algo = static_cast<AlgoEnum>(algo);
    perf.status = status;
    perf.time = -1.0f;  // a heuristic, not a measurement
    perf.memory = memory;
    perf.determinism = determinism;
    perf.mathType = reported_math(p, *conv);
    results[count++] = perf;
  };
  const PassInfo pi = info(pass);
  for (const Algo& a : pi.algos)
    put(a.id, CUDNN_STATUS_SUCCESS, algo_workspace(a, p), a.determinism);
  for (int algo = 0; algo < pi.algo_count; ++algo)
    if (find_algo(pass, algo) == nullptr)
      put(algo, CUDNN_STATUS_NOT_SUPPORTED, 0, CUDNN_NON_DETERMINISTIC);
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t workspace_size(const char* call, Pass pass, cudnnContext* handle, const Roles& roles,
                             const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                             const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                             int algo, size_t* bytes) {
  if (const cudnnStatus_t status = check_handle(call, handle); status != CUDNN_STATUS_SUCCESS)
    return status;
  if (bytes == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "sizeInBytes is NULL");
  ConvShape p;
  if (const cudnnStatus_t status = make_shape(call, roles, x, w, conv, y, p);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  const Algo* found = nullptr;
  if (const cudnnStatus_t status = lookup_algo(call, pass, algo, found);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  *bytes = algo_workspace(*found, p);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t max_count(const char* call, Pass pass, cudnnContext* handle, int* count) {
  if (const cudnnStatus_t status = check_handle(call, handle); status != CUDNN_STATUS_SUCCESS)
    return status;
  if (count == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "count is NULL");
  *count = info(pass).algo_count;
  return CUDNN_STATUS_SUCCESS;
}

// One device buffer argument of a compute call.
struct Operand {
  const void* ptr = nullptr;
  const char* role = "";  // the parameter's name: "x", "dy", "dw"
  int64_t elements = 0;
};

// Checks the arguments of one compute call and queues it on the handle's
// stream; the statuses cuDNN would return come back now, the arithmetic
// runs when the stream reaches it. `a` and `b` are the inputs in the order
// conv_compute.h takes them, `out` the output.
cudnnStatus_t run(const char* call, Pass pass, cudnnContext* handle, const void* alpha_ptr,
                  const void* beta_ptr, const ConvShape& p, int algo, void* workspace,
                  size_t workspace_bytes, Operand a, Operand b, Operand out) {
  if (alpha_ptr == nullptr || beta_ptr == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "alpha or beta is NULL");
  const int64_t element = element_bytes(p.type);
  for (const Operand* op : {&a, &b, &out}) {
    if (op->ptr == nullptr)
      return refuse(CUDNN_STATUS_BAD_PARAM, call, std::string(op->role) + " is NULL");
    if (reinterpret_cast<uintptr_t>(op->ptr) % static_cast<uintptr_t>(element) != 0)
      return refuse(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, call,
                    std::string(op->role) + " is not aligned to its " + std::to_string(element) +
                        "-byte elements");
  }
  const Algo* found = nullptr;
  if (const cudnnStatus_t status = lookup_algo(call, pass, algo, found);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  const size_t required = algo_workspace(*found, p);
  if (workspace_bytes < required)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "workSpaceSizeInBytes = " + std::to_string(workspace_bytes) +
                      " is less than the " + std::to_string(required) + " bytes algo " +
                      std::to_string(algo) + " needs (as its WorkspaceSize query reports)");
  if (required > 0 && workspace == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "workSpace is NULL but algo " + std::to_string(algo) + " needs " +
                      std::to_string(required) + " bytes");
  if (required > 0 && reinterpret_cast<uintptr_t>(workspace) % alignof(float) != 0)
    return refuse(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, call,
                  "workSpace is not aligned to 4 bytes (it holds f32 columns)");

  // Host scalars are read now: the caller's may be gone when the work runs.
  float alpha = 0.0f, beta = 0.0f;
  std::memcpy(&alpha, alpha_ptr, sizeof alpha);
  std::memcpy(&beta, beta_ptr, sizeof beta);

  StreamWork work;
  work.name = call;
  const auto bytes = [&](const Operand& op) { return static_cast<size_t>(op.elements * element); };
  work.accesses.push_back({a.ptr, bytes(a), AccessKind::read, a.role});
  work.accesses.push_back({b.ptr, bytes(b), AccessKind::read, b.role});
  if (beta != 0.0f) work.accesses.push_back({out.ptr, bytes(out), AccessKind::read, out.role});
  work.accesses.push_back({out.ptr, bytes(out), AccessKind::write, out.role});
  float* columns = nullptr;
  if (required > 0) {
    work.accesses.push_back({workspace, required, AccessKind::write, "workSpace"});
    columns = static_cast<float*>(workspace);
  }
  const std::string name = call;
  work.start = [name, pass, p, in_a = a.ptr, in_b = b.ptr, result = const_cast<void*>(out.ptr),
                alpha, beta, columns] {
    try {
      switch (pass) {
        case Pass::forward:
          conv_forward(p, in_a, in_b, result, alpha, beta, columns);
          break;
        case Pass::backward_data:
          conv_backward_data(p, in_a, in_b, result, alpha, beta, columns);
          break;
        case Pass::backward_filter:
          conv_backward_filter(p, in_a, in_b, result, alpha, beta, columns);
          break;
      }
    } catch (const std::bad_alloc&) {
      fault(name + ": the emulator ran out of host memory for its scratch buffers");
    }
  };
  const cudaError_t queued = submit(handle->stream, std::move(work));
  if (queued != cudaSuccess)
    return refuse(
        CUDNN_STATUS_EXECUTION_FAILED_CUDART, call,
        std::string("the emulated runtime refused the work: ") + cudaGetErrorName(queued));
  return CUDNN_STATUS_SUCCESS;
}

constexpr Roles kForwardRoles{"xDesc", "wDesc", "convDesc", "yDesc"};
constexpr Roles kForwardV7Roles{"srcDesc", "filterDesc", "convDesc", "destDesc"};
constexpr Roles kBackwardDataRoles{"dxDesc", "wDesc", "convDesc", "dyDesc"};
constexpr Roles kBackwardDataV7Roles{"gradDesc", "filterDesc", "convDesc", "diffDesc"};
constexpr Roles kBackwardFilterRoles{"xDesc", "dwDesc", "convDesc", "dyDesc"};
constexpr Roles kBackwardFilterV7Roles{"srcDesc", "gradDesc", "convDesc", "diffDesc"};

}  // namespace
}  // namespace sdp::emu::cudnn

namespace emu = sdp::emu::cudnn;
using emu::Pass;

extern "C" {

cudnnStatus_t CUDNNWINAPI cudnnGetConvolution2dForwardOutputDim(
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t inputTensorDesc,
    const cudnnFilterDescriptor_t filterDesc, int* n, int* c, int* h, int* w) {
  constexpr const char* call = "cudnnGetConvolution2dForwardOutputDim";
  constexpr emu::Roles roles{"inputTensorDesc", "filterDesc", "convDesc", ""};
  cudnnStatus_t status = emu::check_convolution(call, roles.conv, convDesc);
  if (status == CUDNN_STATUS_SUCCESS) status = emu::check_tensor(call, roles.x, inputTensorDesc);
  if (status == CUDNN_STATUS_SUCCESS) status = emu::check_filter(call, roles.w, filterDesc);
  if (status != CUDNN_STATUS_SUCCESS) return status;
  if (n == nullptr || c == nullptr || h == nullptr || w == nullptr)
    return emu::refuse(CUDNN_STATUS_BAD_PARAM, call, "an output pointer (n, c, h, w) is NULL");
  int64_t out_h = 0, out_w = 0;
  status = emu::output_extents(call, roles, *inputTensorDesc, *filterDesc, *convDesc, out_h, out_w);
  if (status != CUDNN_STATUS_SUCCESS) return status;
  *n = inputTensorDesc->n;
  *c = filterDesc->k;
  *h = static_cast<int>(out_h);  // at most the padded input's extent, an int
  *w = static_cast<int>(out_w);
  return CUDNN_STATUS_SUCCESS;
}

// ---- forward --------------------------------------------------------------------

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle,
                                                                      int* count) {
  return emu::max_count("cudnnGetConvolutionForwardAlgorithmMaxCount", Pass::forward, handle,
                        count);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return emu::list_algorithms<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      "cudnnGetConvolutionForwardAlgorithm_v7", Pass::forward, handle, emu::kForwardV7Roles,
      srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return emu::workspace_size("cudnnGetConvolutionForwardWorkspaceSize", Pass::forward, handle,
                             emu::kForwardRoles, xDesc, wDesc, convDesc, yDesc,
                             static_cast<int>(algo), sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionForward(
    cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnTensorDescriptor_t yDesc, void* y) {
  constexpr const char* call = "cudnnConvolutionForward";
  if (const cudnnStatus_t status = emu::check_handle(call, handle); status != CUDNN_STATUS_SUCCESS)
    return status;
  emu::ConvShape p;
  if (const cudnnStatus_t status =
          emu::make_shape(call, emu::kForwardRoles, xDesc, wDesc, convDesc, yDesc, p);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  return emu::run(call, Pass::forward, handle, alpha, beta, p, static_cast<int>(algo), workSpace,
                  workSpaceSizeInBytes, {x, "x", p.x_elements()}, {w, "w", p.w_elements()},
                  {y, "y", p.y_elements()});
}

// ---- backward data ----------------------------------------------------------------

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle,
                                                                           int* count) {
  return emu::max_count("cudnnGetConvolutionBackwardDataAlgorithmMaxCount", Pass::backward_data,
                        handle, count);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return emu::list_algorithms<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      "cudnnGetConvolutionBackwardDataAlgorithm_v7", Pass::backward_data, handle,
      emu::kBackwardDataV7Roles, gradDesc, filterDesc, convDesc, diffDesc, requestedAlgoCount,
      returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
    cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
  return emu::workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", Pass::backward_data,
                             handle, emu::kBackwardDataRoles, dxDesc, wDesc, convDesc, dyDesc,
                             static_cast<int>(algo), sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionBackwardData(
    cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t wDesc, const void* w,
    const cudnnTensorDescriptor_t dyDesc, const void* dy,
    const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionBwdDataAlgo_t algo,
    void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnTensorDescriptor_t dxDesc, void* dx) {
  constexpr const char* call = "cudnnConvolutionBackwardData";
  if (const cudnnStatus_t status = emu::check_handle(call, handle); status != CUDNN_STATUS_SUCCESS)
    return status;
  emu::ConvShape p;
  if (const cudnnStatus_t status =
          emu::make_shape(call, emu::kBackwardDataRoles, dxDesc, wDesc, convDesc, dyDesc, p);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  return emu::run(call, Pass::backward_data, handle, alpha, beta, p, static_cast<int>(algo),
                  workSpace, workSpaceSizeInBytes, {w, "w", p.w_elements()},
                  {dy, "dy", p.y_elements()}, {dx, "dx", p.x_elements()});
}

// ---- backward filter --------------------------------------------------------------

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle,
                                                                             int* count) {
  return emu::max_count("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", Pass::backward_filter,
                        handle, count);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return emu::list_algorithms<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7", Pass::backward_filter, handle,
      emu::kBackwardFilterV7Roles, srcDesc, gradDesc, convDesc, diffDesc, requestedAlgoCount,
      returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t* sizeInBytes) {
  constexpr emu::Roles roles{"xDesc", "gradDesc", "convDesc", "dyDesc"};
  return emu::workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize",
                             Pass::backward_filter, handle, roles, xDesc, gradDesc, convDesc,
                             dyDesc, static_cast<int>(algo), sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionBackwardFilter(
    cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnTensorDescriptor_t dyDesc, const void* dy,
    const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionBwdFilterAlgo_t algo,
    void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnFilterDescriptor_t dwDesc, void* dw) {
  constexpr const char* call = "cudnnConvolutionBackwardFilter";
  if (const cudnnStatus_t status = emu::check_handle(call, handle); status != CUDNN_STATUS_SUCCESS)
    return status;
  emu::ConvShape p;
  if (const cudnnStatus_t status =
          emu::make_shape(call, emu::kBackwardFilterRoles, xDesc, dwDesc, convDesc, dyDesc, p);
      status != CUDNN_STATUS_SUCCESS)
    return status;
  return emu::run(call, Pass::backward_filter, handle, alpha, beta, p, static_cast<int>(algo),
                  workSpace, workSpaceSizeInBytes, {x, "x", p.x_elements()},
                  {dy, "dy", p.y_elements()}, {dw, "dw", p.w_elements()});
}

}  // extern "C"
