#pragma once
// The arithmetic of one emulated cublasLtMatmul, run in stream order by the
// work cublasLtMatmul submits. Everything is plain data, copied at call time.
#include <cublasLt.h>

#include <cstdint>

namespace sdp::emu::cublaslt {

// One stored column-major operand: `rows` x `cols` elements of `type`,
// column j at ptr + j * ld elements.
struct Operand {
  const void* ptr = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int64_t rows = 0, cols = 0, ld = 0;
};

// D [m, n] = alpha op(A) [m, k] op(B) [k, n] + beta C [m, n], all
// column-major; C is not read when beta == 0 (it may hold NaN, or be NULL).
// C and D may be the same memory with the same layout.
struct MatmulTask {
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  Operand a, b, c;
  void* d = nullptr;
  cudaDataType_t d_type = CUDA_R_32F;
  int64_t ldd = 0;
};

// f32 products and sums (OpenBLAS sgemm) on operands widened exactly to f32,
// then alpha and beta applied in f32 and each D element rounded once to D's
// type (bf16: round to nearest, ties to even).
void run_matmul(const MatmulTask& task);

}  // namespace sdp::emu::cublaslt
