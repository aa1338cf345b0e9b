// cuBLASLt GEMMs for the linear layer (see gemm.h for the dtype rules).
//
// Row-major tensors versus column-major cuBLAS. A row-major matrix M [r, c]
// (leading dimension c) is, read column-major, the matrix M^T of c rows and r
// columns with the same leading dimension c. So each row-major product is
// written as the column-major product of the transposes, and no operand is
// ever copied or transposed in memory. cuBLASLt computes, column-major,
//   D [m, n] = alpha op(A) [m, k] op(B) [k, n] + beta C,
// where a stored A is [m, k] for op N and [k, m] for op T (likewise B).
// Below, Xc denotes the column-major reading of row-major x, i.e. x^T.
//
// forward      y [N, out] = x [N, in] w^T, w [out, in]:
//   y^T = w x^T. wc = w^T is stored [in, out] (ld in), so w = wc^T: A = w
//   with op T; xc = x^T is stored [in, N] (ld in): B = x with op N.
//   m = out, n = N, k = in; D = yc [out, N], ld out.
// backward_input dx [N, in] = dy [N, out] w [out, in]:
//   dx^T = w^T dy^T = wc dyc. A = w with op N (stored [in, out], ld in);
//   B = dy with op N (stored [out, N], ld out).
//   m = in, n = N, k = out; D = dxc [in, N], ld in.
// backward_weight dw [out, in] += dy^T [out, N] x [N, in]:
//   dw^T = x^T dy = xc dyc^T. A = x with op N (stored [in, N], ld in);
//   B = dy with op T (stored [out, N], ld out).
//   m = in, n = out, k = N; C = D = dwc [in, out], ld in, beta = 1.
// The forward is the "TN" form cuBLAS kernels are fastest in; none of the
// three needs a transpose copy.
#include "kernels/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {

namespace {

// Large enough for the split-K and stream-K algorithms cuBLASLt picks for
// the skinny products of small models; the Hopper recommendation is 32 MiB.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// Distinct shapes of one model are a few dozen; the bound only keeps a
// shape-varying caller (tests, benchmarks) from growing the cache forever.
constexpr size_t kMaxCachedPlans = 512;

std::atomic<size_t> workspace_bytes_total{0};

cudaDataType_t cublas_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    default:
      fail(op, ": unsupported dtype ", dtype_name(dtype), " on CUDA (valid: f32, bf16)");
  }
}

// The largest power of two (up to 256, cuBLASLt's default assumption) that
// divides the address. Views into flat parameter and gradient buffers need
// not sit on 256-byte boundaries, and the heuristic must only offer
// algorithms that work with the alignment the pointers really have.
uint32_t alignment_of(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// Everything the choice of algorithm depends on: the key of the plan cache.
struct GemmKey {
  cudaDataType_t ab_type = CUDA_R_32F;  // A and B
  cudaDataType_t cd_type = CUDA_R_32F;  // C and D
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // beta = 1 (else 0)
  uint32_t align_a = 0, align_b = 0, align_c = 0;

  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& key) const {
    size_t h = 0;
    auto mix = [&h](uint64_t v) {
      h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    };
    mix(static_cast<uint64_t>(key.ab_type));
    mix(static_cast<uint64_t>(key.cd_type));
    mix(static_cast<uint64_t>(key.op_a) * 2 + static_cast<uint64_t>(key.op_b));
    for (int64_t v : {key.m, key.n, key.k, key.lda, key.ldb, key.ldc})
      mix(static_cast<uint64_t>(v));
    mix(key.accumulate);
    mix((uint64_t{key.align_a} << 32) ^ (uint64_t{key.align_b} << 16) ^ key.align_c);
    return h;
  }
};

// Descriptors and the heuristic's first algorithm for one GemmKey; built
// once, reused by every later call with the same key.
class GemmPlan {
 public:
  GemmPlan(cublasLtHandle_t handle, const GemmKey& key) {
    try {
      build(handle, key);
    } catch (...) {
      release();
      throw;
    }
  }
  ~GemmPlan() { release(); }
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  // D = op(A) op(B) (+ D when the key accumulates); C aliases D.
  void run(cublasLtHandle_t handle, bool accumulate, const void* a, const void* b, void* d,
           void* workspace, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(handle, desc_, &alpha, a, a_, b, b_, &beta, d, c_, d, c_, &algo_,
                                workspace, kWorkspaceBytes, stream));
  }

 private:
  void build(cublasLtHandle_t handle, const GemmKey& key) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int32_t op_a = key.op_a, op_b = key.op_b;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_a,
                                                sizeof(op_a)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_b,
                                                sizeof(op_b)));
    // Stored shapes: A is [m, k] for op N, [k, m] for op T; B is [k, n] or [n, k].
    const bool a_n = key.op_a == CUBLAS_OP_N, b_n = key.op_b == CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, key.ab_type, a_n ? key.m : key.k,
                                            a_n ? key.k : key.m, key.lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, key.ab_type, b_n ? key.k : key.n,
                                            b_n ? key.n : key.k, key.ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, key.cd_type, key.m, key.n, key.ldc));

    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference_));
    const uint64_t workspace = kWorkspaceBytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    const uint32_t aligns[4] = {key.align_a, key.align_b, key.align_c, key.align_c};
    const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference_, align_attrs[i], &aligns[i],
                                                        sizeof(aligns[i])));
    // The first (best-ranked) algorithm is the one used: asking for more and
    // timing them would cost a benchmark per shape for a few percent.
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle, desc_, a_, b_, c_, c_, preference_, 1, &result, &found);
    if (status != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
      fail("cuBLASLt found no algorithm for the GEMM m = ", key.m, ", n = ", key.n,
           ", k = ", key.k, " (A/B ", key.ab_type == CUDA_R_16BF ? "bf16" : "f32", ", C/D ",
           key.cd_type == CUDA_R_16BF ? "bf16" : "f32", ", pointer alignments ", key.align_a,
           "/", key.align_b, "/", key.align_c, " bytes): ",
           status != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(status)
           : found < 1                     ? "no candidate returned"
                                           : cublasGetStatusString(result.state));
    algo_ = result.algo;
    cublasLtMatmulPreferenceDestroy(preference_);
    preference_ = nullptr;
  }

  void release() {
    // Destroy calls only free host memory; their status carries no news.
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (preference_) cublasLtMatmulPreferenceDestroy(preference_);
    preference_ = nullptr;
    c_ = b_ = a_ = nullptr;
    desc_ = nullptr;
  }

  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;  // C and D share c_
  cublasLtMatmulPreference_t preference_ = nullptr;  // only while building
  cublasLtMatmulAlgo_t algo_{};
};

// Per device: the handle, the workspace and the plan cache. Created on first
// use and never destroyed: freeing CUDA resources from static destructors
// races the runtime's own teardown at exit.
struct DeviceGemmState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  // Recorded after every GEMM on the stream that ran it. A GEMM queued on a
  // different stream first waits for it, so two streams never share the
  // workspace at the same time (an ordering the one-stream case gets free).
  cudaEvent_t workspace_released = nullptr;
  cudaStream_t last_stream = nullptr;
  bool any_gemm_queued = false;
  std::unordered_map<GemmKey, std::unique_ptr<GemmPlan>, GemmKeyHash> plans;
};

std::mutex& state_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The calling thread's current device's state; the caller holds state_mutex().
DeviceGemmState& state_for_current_device() {
  static std::map<int, DeviceGemmState*>* states = new std::map<int, DeviceGemmState*>();
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  DeviceGemmState*& state = (*states)[device];
  if (state == nullptr) {
    auto fresh = std::make_unique<DeviceGemmState>();
    CUBLAS_CHECK(cublasLtCreate(&fresh->handle));
    CUDA_CHECK(cudaMalloc(&fresh->workspace, kWorkspaceBytes));
    CUDA_CHECK(cudaEventCreateWithFlags(&fresh->workspace_released, cudaEventDisableTiming));
    workspace_bytes_total += kWorkspaceBytes;
    state = fresh.release();
  }
  return *state;
}

// One GEMM in column-major terms (see the derivation at the top); C = D.
struct GemmCall {
  DType ab_dtype, cd_dtype;
  cublasOperation_t op_a, op_b;
  int64_t m, n, k, lda, ldb, ldc;
  bool accumulate;
  const void* a;
  const void* b;
  void* d;
};

void run_gemm(const GemmCall& call, const char* op) {
  if (call.m == 0 || call.n == 0) return;  // D is empty
  cudaStream_t stream = compute_stream();
  if (call.k == 0) {
    // An empty sum: D = 0 (or D unchanged when accumulating). All-zero bits
    // are 0 in both f32 and bf16.
    if (!call.accumulate)
      CUDA_CHECK(cudaMemsetAsync(call.d, 0,
                                 static_cast<size_t>(call.m * call.n) * dtype_size(call.cd_dtype),
                                 stream));
    return;
  }
  GemmKey key;
  key.ab_type = cublas_type(call.ab_dtype, op);
  key.cd_type = cublas_type(call.cd_dtype, op);
  key.op_a = call.op_a;
  key.op_b = call.op_b;
  key.m = call.m;
  key.n = call.n;
  key.k = call.k;
  key.lda = call.lda;
  key.ldb = call.ldb;
  key.ldc = call.ldc;
  key.accumulate = call.accumulate;
  key.align_a = alignment_of(call.a);
  key.align_b = alignment_of(call.b);
  key.align_c = alignment_of(call.d);

  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceGemmState& state = state_for_current_device();
  auto it = state.plans.find(key);
  if (it == state.plans.end()) {
    if (state.plans.size() >= kMaxCachedPlans) state.plans.clear();
    it = state.plans.emplace(key, std::make_unique<GemmPlan>(state.handle, key)).first;
  }
  if (state.any_gemm_queued && stream != state.last_stream)
    CUDA_CHECK(cudaStreamWaitEvent(stream, state.workspace_released, 0));
  it->second->run(state.handle, call.accumulate, call.a, call.b, call.d, state.workspace, stream);
  CUDA_CHECK(cudaEventRecord(state.workspace_released, stream));
  state.last_stream = stream;
  state.any_gemm_queued = true;
}

// Rows of an activation [..., features]: N of the [N, features] view.
int64_t rows_of(const Tensor& act) {
  return act.size(-1) == 0 ? 0 : act.numel() / act.size(-1);
}

}  // namespace

void linear_forward(const Tensor& x, const Tensor& w, Tensor& y) {
  const int64_t n = rows_of(x), in = w.size(1), out = w.size(0);
  run_gemm(GemmCall{x.dtype(), y.dtype(), CUBLAS_OP_T, CUBLAS_OP_N, /*m=*/out, /*n=*/n,
                    /*k=*/in, /*lda=*/in, /*ldb=*/in, /*ldc=*/out, false, w.raw(), x.raw(),
                    y.raw()},
           "linear_forward");
}

void linear_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx) {
  const int64_t n = rows_of(dx), in = w.size(1), out = w.size(0);
  run_gemm(GemmCall{dy.dtype(), dx.dtype(), CUBLAS_OP_N, CUBLAS_OP_N, /*m=*/in, /*n=*/n,
                    /*k=*/out, /*lda=*/in, /*ldb=*/out, /*ldc=*/in, false, w.raw(), dy.raw(),
                    dx.raw()},
           "linear_backward_input");
}

void linear_backward_weight(const Tensor& dy, const Tensor& x, Tensor& dw) {
  const int64_t n = rows_of(x), in = dw.size(1), out = dw.size(0);
  run_gemm(GemmCall{x.dtype(), dw.dtype(), CUBLAS_OP_N, CUBLAS_OP_T, /*m=*/in, /*n=*/out,
                    /*k=*/n, /*lda=*/in, /*ldb=*/out, /*ldc=*/in, true, x.raw(), dy.raw(),
                    dw.raw()},
           "linear_backward_weight");
}

size_t gemm_workspace_bytes() { return workspace_bytes_total.load(); }

}  // namespace sdp::cuda
