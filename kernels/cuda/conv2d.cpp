// Convolution through cuDNN's descriptor API (cudnn_cnn). Per call: the
// descriptors are built (host-side structs, cheap), the algorithms come from
// a cache filled by cuDNN's heuristics, and one cuDNN call runs on the
// thread's compute stream. See conv2d.h for the workspace layout.
//
// Choosing an algorithm: cudnnGetConvolution*Algorithm_v7 lists candidates
// ordered by expected speed. Those that cuDNN supports for the problem, that
// need no TF32 in f32 runs and whose scratch fits the budget are ranked:
// deterministic ones first (the same gradients bit for bit on every run;
// forward algorithms all are; the embedding and RMSNorm weight gradients
// elsewhere accumulate with atomic adds and are not), the
// others after them, each group in cuDNN's order. A call runs the first of
// the ranking, and the next whenever cuDNN turns one down before queuing any
// work (the heuristics never see the pointers, and an algorithm may still
// refuse a misaligned view). A candidate's scratch is the larger of the
// heuristic's figure and cudnnGetConvolution*WorkspaceSize's, so none runs
// short of it.
//
// cuDNN 9 marks this API deprecated; its headers say so only when
// CUDNN_WARN_DEPRECATED is defined, which this build does not do.
#include "kernels/cuda/conv2d.h"

#ifdef SDP_HAVE_CUDNN

#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/accumulate_widening.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_handle.h"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

// cuDNN's share of the workspace: the same formula as the CUDA branch of
// ops::conv2d_workspace_elems (kernels/ops_conv2d.cpp), which sizes it.
constexpr int64_t kScratchCapBytes = int64_t{64} << 20;
// Where cuDNN's scratch starts after the bf16 staging copy of dw.
constexpr int64_t kScratchAlignBytes = 256;
// Distinct conv problems of a model are a few dozen; the bound only keeps a
// caller that varies shapes without end (tests, benchmarks) from growing it.
constexpr size_t kMaxCachedRankings = 1024;

enum class ConvPass : uint8_t { forward, backward_data, backward_filter };

// Every extent of one convolution: x [batch, in_channels, height, width],
// w [out_channels, in_channels, kernel, kernel],
// y [batch, out_channels, out_height, out_width].
struct ConvProblem {
  int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel = 0, out_height = 0, out_width = 0;
  int64_t stride = 1, padding = 0;
  DType dtype = DType::f32;  // x, w, y (and dw's staging copy in bf16 runs)
};

ConvProblem problem_of(const Shape& x, const Shape& w, const ops::Conv2dGeometry& geometry,
                       DType dtype) {
  ConvProblem p;
  p.batch = x[0];
  p.in_channels = x[1];
  p.height = x[2];
  p.width = x[3];
  p.out_channels = w[0];
  p.kernel = geometry.kernel;
  p.out_height = geometry.out_size(p.height);
  p.out_width = geometry.out_size(p.width);
  p.stride = geometry.stride;
  p.padding = geometry.padding;
  p.dtype = dtype;
  return p;
}

std::string describe(const ConvProblem& p) {
  std::ostringstream s;
  s << "x [" << p.batch << ", " << p.in_channels << ", " << p.height << ", " << p.width << "], w ["
    << p.out_channels << ", " << p.in_channels << ", " << p.kernel << ", " << p.kernel
    << "], stride " << p.stride << ", padding " << p.padding << ", " << dtype_name(p.dtype);
  return s.str();
}

// cuDNN's legacy descriptors take int extents, and its kernels index
// tensors of at most INT32_MAX elements.
int as_int(int64_t v, const ConvProblem& p, const char* op) {
  if (v < 0 || v > INT_MAX)
    fail(op, ": extent ", v, " exceeds cuDNN's int range (", describe(p), ")");
  return static_cast<int>(v);
}

void check_cudnn_limits(const ConvProblem& p, const char* op) {
  const int64_t x_elems = p.batch * p.in_channels * p.height * p.width;
  const int64_t y_elems = p.batch * p.out_channels * p.out_height * p.out_width;
  if (x_elems > INT_MAX || y_elems > INT_MAX)
    fail(op, ": a tensor of more than ", INT_MAX, " elements is beyond cuDNN's limit (",
         describe(p), "); split the batch");
}

cudnnDataType_t cudnn_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      fail(op, ": unsupported dtype ", dtype_name(dtype), " on CUDA (valid: f32, bf16)");
  }
}

// ---- descriptors (created and destroyed per call) ----------------------------

class TensorDescriptor {
 public:
  TensorDescriptor(int n, int c, int h, int w, cudnnDataType_t type) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    const cudnnStatus_t status =
        cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, type, n, c, h, w);
    if (status != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyTensorDescriptor(desc_);
      fail("cudnnSetTensor4dDescriptor([", n, ", ", c, ", ", h, ", ", w,
           "]) failed: ", cudnnGetErrorString(status));
    }
  }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDescriptor {
 public:
  FilterDescriptor(int out_channels, int in_channels, int kernel, cudnnDataType_t type) {
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
    const cudnnStatus_t status = cudnnSetFilter4dDescriptor(
        desc_, type, CUDNN_TENSOR_NCHW, out_channels, in_channels, kernel, kernel);
    if (status != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyFilterDescriptor(desc_);
      fail("cudnnSetFilter4dDescriptor([", out_channels, ", ", in_channels, ", ", kernel, ", ",
           kernel, "]) failed: ", cudnnGetErrorString(status));
    }
  }
  ~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

// Cross-correlation (what deep-learning frameworks call convolution), no
// dilation, f32 accumulation for both f32 and bf16 data.
class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor(int padding, int stride) {
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
    const cudnnStatus_t status = cudnnSetConvolution2dDescriptor(
        desc_, padding, padding, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    if (status != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyConvolutionDescriptor(desc_);
      fail("cudnnSetConvolution2dDescriptor(padding ", padding, ", stride ", stride,
           ") failed: ", cudnnGetErrorString(status));
    }
  }
  ~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(desc_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }
  void set_math(cudnnMathType_t math) const {
    CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, math));
  }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

// The f32 math the engine allows: FMA only. CUDNN_DEFAULT_MATH would let
// cuDNN use TF32 tensor cores on Ampere and later (10-bit mantissas), which
// f32 runs, kept for comparisons against the CPU, must not.
cudnnMathType_t base_math(DType dtype) {
  return dtype == DType::bf16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
}

// The four descriptors of one problem; x and y stand for dx and dy in the
// backward passes, and the filter has the activation dtype (dw's staging
// copy in bf16 runs, dw itself in f32 runs).
struct ConvDescriptors {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;

  ConvDescriptors(const ConvProblem& p, const char* op)
      : x(as_int(p.batch, p, op), as_int(p.in_channels, p, op), as_int(p.height, p, op),
          as_int(p.width, p, op), cudnn_type(p.dtype, op)),
        y(as_int(p.batch, p, op), as_int(p.out_channels, p, op), as_int(p.out_height, p, op),
          as_int(p.out_width, p, op), cudnn_type(p.dtype, op)),
        w(as_int(p.out_channels, p, op), as_int(p.in_channels, p, op), as_int(p.kernel, p, op),
          cudnn_type(p.dtype, op)),
        conv(as_int(p.padding, p, op), as_int(p.stride, p, op)) {
    conv.set_math(base_math(p.dtype));
    // cuDNN's output extents must be the ones the op API promises (a
    // mismatch would mean the geometry is read differently on the two sides).
    int n = 0, c = 0, h = 0, w_out = 0;
    CUDNN_CHECK(
        cudnnGetConvolution2dForwardOutputDim(conv.get(), x.get(), w.get(), &n, &c, &h, &w_out));
    if (n != p.batch || c != p.out_channels || h != p.out_height || w_out != p.out_width)
      fail(op, ": cuDNN computes the output [", n, ", ", c, ", ", h, ", ", w_out,
           "] where the op expects [", p.batch, ", ", p.out_channels, ", ", p.out_height, ", ",
           p.out_width, "] (", describe(p), ")");
  }
};

// ---- workspace --------------------------------------------------------------

// The part of the workspace cuDNN may use.
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
};

int64_t scratch_cap_bytes(const ConvProblem& p) {
  const int64_t size = static_cast<int64_t>(dtype_size(p.dtype));
  const int64_t im2col_elems =
      p.batch * p.in_channels * p.kernel * p.kernel * p.out_height * p.out_width;
  return std::min(im2col_elems, kScratchCapBytes / size) * size;
}

// cuDNN's scratch: after `reserved_bytes` at the start of the workspace
// (the staging copy, or none), at a 256-byte boundary when anything is
// reserved. Its size is the formula's share (less the most the alignment can
// take, when anything is reserved), or what the workspace has room for if
// that is less: it depends on the problem and, for a workspace smaller than
// the formula asks, on the workspace's size, but never on its address or on
// how much larger than needed it is, so the cached choice of algorithm, and
// with it every bit of the result, does not change with the caller's
// allocation.
Scratch scratch_of(const Tensor& workspace, const ConvProblem& p, int64_t reserved_bytes) {
  const int64_t total = static_cast<int64_t>(workspace.bytes());
  auto* base = static_cast<char*>(workspace.raw());
  int64_t offset = 0, room = total, share = scratch_cap_bytes(p);
  if (reserved_bytes > 0) {
    const auto address = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(reserved_bytes);
    const auto aligned =
        (address + kScratchAlignBytes - 1) / kScratchAlignBytes * kScratchAlignBytes;
    offset = reserved_bytes + static_cast<int64_t>(aligned - address);
    room = total - reserved_bytes - kScratchAlignBytes;  // whatever the padding was
    share -= kScratchAlignBytes;
  }
  const int64_t bytes = std::max<int64_t>(0, std::min(room, share));
  return Scratch{bytes > 0 ? base + offset : nullptr, static_cast<size_t>(bytes)};
}

// ---- choice of algorithm ------------------------------------------------------

struct AlgoChoice {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

// One entry of a _v7 heuristic list, whichever pass it came from.
struct Candidate {
  int algo = 0;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  size_t memory = 0;
  bool deterministic = false;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

template <typename Perf>
std::vector<Candidate> candidates_of(const std::vector<Perf>& perfs, int returned) {
  std::vector<Candidate> out;
  for (int i = 0; i < returned && i < static_cast<int>(perfs.size()); ++i) {
    const Perf& perf = perfs[static_cast<size_t>(i)];
    out.push_back(Candidate{static_cast<int>(perf.algo), perf.status, perf.memory,
                            perf.determinism == CUDNN_DETERMINISTIC, perf.mathType});
  }
  return out;
}

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward:
      return "forward";
    case ConvPass::backward_data:
      return "backward data";
    case ConvPass::backward_filter:
      return "backward filter";
  }
  return "?";
}

// The candidates, in cuDNN's order, for one pass of the problem.
std::vector<Candidate> heuristic_candidates(cudnnHandle_t handle, const ConvDescriptors& d,
                                            ConvPass pass) {
  int max_count = 0, returned = 0;
  switch (pass) {
    case ConvPass::forward: {
      CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(static_cast<size_t>(std::max(max_count, 1)));
      CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x.get(), d.w.get(), d.conv.get(),
                                                         d.y.get(), static_cast<int>(perfs.size()),
                                                         &returned, perfs.data()));
      return candidates_of(perfs, returned);
    }
    case ConvPass::backward_data: {
      CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(
          static_cast<size_t>(std::max(max_count, 1)));
      CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          handle, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), static_cast<int>(perfs.size()),
          &returned, perfs.data()));
      return candidates_of(perfs, returned);
    }
    case ConvPass::backward_filter: {
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(
          static_cast<size_t>(std::max(max_count, 1)));
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          handle, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), static_cast<int>(perfs.size()),
          &returned, perfs.data()));
      return candidates_of(perfs, returned);
    }
  }
  return {};
}

// Sets `bytes` to the scratch `algo` needs under the descriptor's current
// math type; false when cuDNN refuses the pair.
bool workspace_size(cudnnHandle_t handle, const ConvDescriptors& d, ConvPass pass, int algo,
                    size_t& bytes) {
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  switch (pass) {
    case ConvPass::forward:
      status = cudnnGetConvolutionForwardWorkspaceSize(
          handle, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
          static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
      break;
    case ConvPass::backward_data:
      status = cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
      break;
    case ConvPass::backward_filter:
      status = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
      break;
  }
  return status == CUDNN_STATUS_SUCCESS;
}

bool uses_tensor_cores(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The usable algorithms (supported, within the budget, no TF32 in f32
// runs), best first: the deterministic ones in cuDNN's speed order, then the
// others in the same order. Never empty: fails naming every candidate and
// why it was turned down.
using AlgoRanking = std::vector<AlgoChoice>;

AlgoRanking rank_algorithms(cudnnHandle_t handle, const ConvDescriptors& d, const ConvProblem& p,
                            ConvPass pass, size_t budget, const char* op) {
  const std::vector<Candidate> candidates = heuristic_candidates(handle, d, pass);
  const bool f32 = p.dtype == DType::f32;
  AlgoRanking deterministic, others;
  std::ostringstream rejected;
  for (const Candidate& c : candidates) {
    if (c.status != CUDNN_STATUS_SUCCESS) {  // not supported for this problem
      rejected << " algo " << c.algo << ": " << cudnnGetErrorString(c.status) << ";";
      continue;
    }
    if (f32 && uses_tensor_cores(c.math)) {
      rejected << " algo " << c.algo << ": TF32 only;";
      continue;
    }
    const cudnnMathType_t math = f32 ? CUDNN_FMA_MATH : c.math;
    d.conv.set_math(math);
    size_t bytes = 0;
    const bool sized = workspace_size(handle, d, pass, c.algo, bytes);
    bytes = std::max(bytes, c.memory);
    if (sized && bytes <= budget) {
      // Forward algorithms are all deterministic; the backward ones that add
      // partial sums with atomics are not.
      (c.deterministic ? deterministic : others).push_back(AlgoChoice{c.algo, math});
    } else {
      rejected << " algo " << c.algo << ": "
               << (sized ? "needs " + std::to_string(bytes) + " bytes;"
                         : std::string("no workspace size;"));
    }
  }
  d.conv.set_math(base_math(p.dtype));
  deterministic.insert(deterministic.end(), others.begin(), others.end());
  if (deterministic.empty())
    fail(op, ": cuDNN offers no ", pass_name(pass), " algorithm for ", describe(p), " within ",
         budget, " bytes of workspace (", candidates.size(), " candidates;",
         rejected.str().empty() ? std::string(" none returned") : rejected.str(),
         "); the workspace comes from ops::conv2d_workspace_elems(..., Device::cuda)");
  return deterministic;
}

// Everything the ranking depends on.
struct RankingKey {
  int device = 0;
  ConvPass pass = ConvPass::forward;
  DType dtype = DType::f32;
  int64_t batch = 0, in_channels = 0, height = 0, width = 0, out_channels = 0, kernel = 0,
          stride = 0, padding = 0;
  size_t budget = 0;
  auto operator<=>(const RankingKey&) const = default;
};

std::mutex& ranking_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Never destroyed (a static map could be freed while another thread still
// runs a convolution at exit).
std::map<RankingKey, AlgoRanking>& ranking_cache() {
  static auto* cache = new std::map<RankingKey, AlgoRanking>();
  return *cache;
}

// A copy: the cache may be cleared by another thread once the lock is gone.
AlgoRanking cached_ranking(cudnnHandle_t handle, const ConvDescriptors& d, const ConvProblem& p,
                           ConvPass pass, size_t budget, const char* op) {
  RankingKey key;
  CUDA_CHECK(cudaGetDevice(&key.device));
  key.pass = pass;
  key.dtype = p.dtype;
  key.batch = p.batch;
  key.in_channels = p.in_channels;
  key.height = p.height;
  key.width = p.width;
  key.out_channels = p.out_channels;
  key.kernel = p.kernel;
  key.stride = p.stride;
  key.padding = p.padding;
  key.budget = budget;
  std::lock_guard<std::mutex> lock(ranking_mutex());
  auto& cache = ranking_cache();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  AlgoRanking ranking = rank_algorithms(handle, d, p, pass, budget, op);
  if (cache.size() >= kMaxCachedRankings) cache.clear();
  cache.emplace(key, ranking);
  return ranking;
}

// Statuses with which cuDNN turns a call down before it queues any work
// (the heuristics cannot see the pointers, so an algorithm they offer may
// still refuse, say, a view that is not 16-byte aligned). The next
// algorithm of the ranking is then tried; any other failure is final.
bool refused_before_launch(cudnnStatus_t status) {
  const int code = static_cast<int>(status);
  return (code >= CUDNN_STATUS_NOT_SUPPORTED && code < CUDNN_STATUS_INTERNAL_ERROR) ||
         status == CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER;
}

// Runs `call(algo)` (one cuDNN convolution call named `call_name`) with the
// best algorithm of the ranking that cuDNN accepts.
template <typename Call>
void run_ranked(const AlgoRanking& ranking, const ConvDescriptors& d, const ConvProblem& p,
                ConvPass pass, const char* op, const char* call_name, Call&& call) {
  std::ostringstream refused;
  for (const AlgoChoice& choice : ranking) {
    d.conv.set_math(choice.math);
    const cudnnStatus_t status = call(choice.algo);
    if (status == CUDNN_STATUS_SUCCESS) return;
    if (!refused_before_launch(status))
      fail(op, ": ", call_name, " (", pass_name(pass), " algorithm ", choice.algo, ", ",
           describe(p), ") failed: ", cudnnGetErrorString(status));
    refused << " algo " << choice.algo << ": " << cudnnGetErrorString(status) << ";";
  }
  fail(op, ": ", call_name, " refused every ", pass_name(pass),
       " algorithm that fits the workspace (", describe(p), "):", refused.str());
}

// y = 0 when the sum that defines it is empty (no input channels, say).
void zero(Tensor& t) {
  if (t.numel() > 0) CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.bytes(), compute_stream()));
}

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const ops::Conv2dGeometry& geometry,
                    Tensor& y, Tensor& workspace, bool accumulate) {
  constexpr const char* op = "conv2d_forward";
  if (y.numel() == 0) return;
  if (x.numel() == 0 || w.numel() == 0) {
    if (!accumulate) zero(y);
    return;
  }
  const ConvProblem p = problem_of(x.shape(), w.shape(), geometry, x.dtype());
  check_cudnn_limits(p, op);
  cudnnHandle_t handle = cudnn_handle();
  const ConvDescriptors d(p, op);
  const Scratch scratch = scratch_of(workspace, p, 0);
  const AlgoRanking ranking = cached_ranking(handle, d, p, ConvPass::forward, scratch.bytes, op);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  run_ranked(ranking, d, p, ConvPass::forward, op, "cudnnConvolutionForward", [&](int algo) {
    return cudnnConvolutionForward(handle, &alpha, d.x.get(), x.raw(), d.w.get(), w.raw(),
                                   d.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                   scratch.ptr, scratch.bytes, &beta, d.y.get(), y.raw());
  });
}

void conv2d_backward_input(const Tensor& dy, const Tensor& w, const ops::Conv2dGeometry& geometry,
                           Tensor& dx, Tensor& workspace, bool accumulate) {
  constexpr const char* op = "conv2d_backward_input";
  if (dx.numel() == 0) return;
  if (dy.numel() == 0 || w.numel() == 0) {
    if (!accumulate) zero(dx);
    return;
  }
  const ConvProblem p = problem_of(dx.shape(), w.shape(), geometry, dx.dtype());
  check_cudnn_limits(p, op);
  cudnnHandle_t handle = cudnn_handle();
  const ConvDescriptors d(p, op);
  const Scratch scratch = scratch_of(workspace, p, 0);
  const AlgoRanking ranking =
      cached_ranking(handle, d, p, ConvPass::backward_data, scratch.bytes, op);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  run_ranked(
      ranking, d, p, ConvPass::backward_data, op, "cudnnConvolutionBackwardData", [&](int algo) {
        return cudnnConvolutionBackwardData(handle, &alpha, d.w.get(), w.raw(), d.y.get(), dy.raw(),
                                            d.conv.get(),
                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                            scratch.ptr, scratch.bytes, &beta, d.x.get(), dx.raw());
      });
}

void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const ops::Conv2dGeometry& geometry,
                            Tensor& dw, Tensor& workspace) {
  constexpr const char* op = "conv2d_backward_weight";
  if (dw.numel() == 0 || x.numel() == 0 || dy.numel() == 0) return;  // dw += nothing
  const ConvProblem p = problem_of(x.shape(), dw.shape(), geometry, x.dtype());
  check_cudnn_limits(p, op);
  // cuDNN writes dw in the activation dtype. In f32 that is dw's own, and
  // beta = 1 accumulates in place; in bf16 it writes a staging copy
  // (beta = 0) that is then added to the f32 dw.
  const bool staged = p.dtype == DType::bf16;
  const int64_t staging_bytes =
      staged ? dw.numel() * static_cast<int64_t>(dtype_size(DType::bf16)) : 0;
  if (static_cast<int64_t>(workspace.bytes()) < staging_bytes)
    fail(op, ": the workspace holds ", workspace.bytes(), " bytes, less than the ", staging_bytes,
         " of dw's bf16 staging copy; size it with ops::conv2d_workspace_elems(..., "
         "Device::cuda)");
  cudnnHandle_t handle = cudnn_handle();
  const ConvDescriptors d(p, op);
  const Scratch scratch = scratch_of(workspace, p, staging_bytes);
  const AlgoRanking ranking =
      cached_ranking(handle, d, p, ConvPass::backward_filter, scratch.bytes, op);
  const Tensor staging(workspace.raw(), dw.shape(), DType::bf16, Device::cuda);
  void* target = staged ? staging.raw() : dw.raw();
  const float alpha = 1.0f, beta = staged ? 0.0f : 1.0f;
  run_ranked(ranking, d, p, ConvPass::backward_filter, op, "cudnnConvolutionBackwardFilter",
             [&](int algo) {
               return cudnnConvolutionBackwardFilter(
                   handle, &alpha, d.x.get(), x.raw(), d.y.get(), dy.raw(), d.conv.get(),
                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), scratch.ptr, scratch.bytes,
                   &beta, d.w.get(), target);
             });
  if (staged) accumulate_bf16_into_f32(staging, dw);
}

}  // namespace sdp::cuda

#else  // no cuDNN in this build

namespace sdp::cuda {
namespace {

[[noreturn]] void no_cudnn(const char* op) {
  fail(op,
       ": this build's CUDA backend has no cuDNN (it was not found when the build was "
       "configured; set SDP_CUDNN_ROOT or SDP_PYTHON_NVIDIA_DIR, see "
       "cmake/SdpFindCudaLibs.cmake); run convolutions with --device cpu or meta");
}

}  // namespace

void conv2d_forward(const Tensor&, const Tensor&, const ops::Conv2dGeometry&, Tensor&, Tensor&,
                    bool) {
  no_cudnn("conv2d_forward");
}
void conv2d_backward_input(const Tensor&, const Tensor&, const ops::Conv2dGeometry&, Tensor&,
                           Tensor&, bool) {
  no_cudnn("conv2d_backward_input");
}
void conv2d_backward_weight(const Tensor&, const Tensor&, const ops::Conv2dGeometry&, Tensor&,
                            Tensor&) {
  no_cudnn("conv2d_backward_weight");
}

}  // namespace sdp::cuda

#endif  // SDP_HAVE_CUDNN
