// The arithmetic of the emulated cublasLtMatmul (see matmul_compute.h).
// D is produced in panels of whole columns so that the f32 scratch stays
// bounded for large products (an lm_head GEMM's D alone can be gigabytes).
#include "cuda_emulator/cublaslt/matmul_compute.h"

#include <cblas.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sdp::emu::cublaslt {
namespace {

// f32 elements of scratch one panel of D may use.
constexpr int64_t kPanelElements = int64_t{1} << 22;

float load(const void* base, cudaDataType_t type, int64_t index) {
  if (type == CUDA_R_16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

void store(void* base, cudaDataType_t type, int64_t index, float value) {
  if (type == CUDA_R_16BF)
    static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(value);  // ties to even
  else
    static_cast<float*>(base)[index] = value;
}

// Columns [first, first + count) of a stored operand as f32 with their
// leading dimension: the memory itself when it is f32, else a widened
// (exact) copy in `scratch` [rows, count] with ld = rows.
struct F32View {
  const float* data = nullptr;
  int64_t ld = 0;
};
F32View as_f32(const Operand& x, int64_t first, int64_t count, std::vector<float>& scratch) {
  if (x.type == CUDA_R_32F) return F32View{static_cast<const float*>(x.ptr) + first * x.ld, x.ld};
  scratch.resize(static_cast<size_t>(x.rows * count));
  for (int64_t j = 0; j < count; ++j)
    for (int64_t i = 0; i < x.rows; ++i)
      scratch[static_cast<size_t>(j * x.rows + i)] = load(x.ptr, x.type, (first + j) * x.ld + i);
  return F32View{scratch.data(), x.rows};
}

CBLAS_TRANSPOSE cblas_op(cublasOperation_t op) {
  return op == CUBLAS_OP_T ? CblasTrans : CblasNoTrans;
}

}  // namespace

void run_matmul(const MatmulTask& t) {
  std::vector<float> a_scratch, b_scratch;
  // A whole: every panel of D needs all of op(A).
  const F32View a = as_f32(t.a, 0, t.a.cols, a_scratch);

  const int64_t panel = std::max<int64_t>(1, std::min<int64_t>(t.n, kPanelElements / t.m));
  std::vector<float> acc(static_cast<size_t>(t.m * panel));  // [m, panel], ld m
  // op(B)[:, j0 : j0 + cols] is stored columns j0.. of B for op N (widened
  // panel by panel), and stored rows j0.. across all k columns for op T
  // (widened once).
  const F32View b_whole = t.op_b == CUBLAS_OP_T ? as_f32(t.b, 0, t.b.cols, b_scratch) : F32View{};
  for (int64_t j0 = 0; j0 < t.n; j0 += panel) {
    const int64_t cols = std::min(panel, t.n - j0);
    const F32View b = t.op_b == CUBLAS_OP_N ? as_f32(t.b, j0, cols, b_scratch)
                                            : F32View{b_whole.data + j0, b_whole.ld};
    cblas_sgemm(CblasColMajor, cblas_op(t.op_a), cblas_op(t.op_b), static_cast<int>(t.m),
                static_cast<int>(cols), static_cast<int>(t.k), 1.0f, a.data, static_cast<int>(a.ld),
                b.data, static_cast<int>(b.ld), 0.0f, acc.data(), static_cast<int>(t.m));
    // alpha and beta in the f32 scale type, one rounding to D's type. With
    // beta == 0, C is not read at all (cuBLAS's rule: NaN in C stays out).
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < t.m; ++i) {
        float value = t.alpha * acc[static_cast<size_t>(j * t.m + i)];
        if (t.beta != 0.0f) value += t.beta * load(t.c.ptr, t.c.type, (j0 + j) * t.c.ld + i);
        store(t.d, t.d_type, (j0 + j) * t.ldd + i, value);
      }
  }
}

}  // namespace sdp::emu::cublaslt
