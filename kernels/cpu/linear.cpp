#include "kernels/cpu/linear.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>

namespace sdp::cpu {

namespace {

// One row-major GEMM, C [m, n] = alpha op(A) op(B) + beta C, for either type.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// BLAS rejects leading dimensions of 0 even for empty matrices.
int ld(int cols) { return std::max(cols, 1); }

}  // namespace

template <typename T>
void linear_forward(const T* x, const T* w, T* y, int n, int in, int out) {
  if (n == 0 || out == 0) return;
  if (in == 0) {  // an empty sum; some BLAS builds skip the beta = 0 store when k = 0
    std::fill(y, y + static_cast<int64_t>(n) * out, T(0));
    return;
  }
  gemm(false, true, n, out, in, x, ld(in), w, ld(in), T(0), y, ld(out));
}

template <typename T>
void linear_backward_input(const T* dy, const T* w, T* dx, int n, int in, int out) {
  if (n == 0 || in == 0) return;
  if (out == 0) {
    std::fill(dx, dx + static_cast<int64_t>(n) * in, T(0));
    return;
  }
  gemm(false, false, n, in, out, dy, ld(out), w, ld(in), T(0), dx, ld(in));
}

template <typename T>
void linear_backward_weight(const T* dy, const T* x, T* dw, int n, int in, int out) {
  if (n == 0 || in == 0 || out == 0) return;  // nothing to add
  gemm(true, false, out, in, n, dy, ld(out), x, ld(in), T(1), dw, ld(in));
}

template void linear_forward<float>(const float*, const float*, float*, int, int, int);
template void linear_forward<double>(const double*, const double*, double*, int, int, int);
template void linear_backward_input<float>(const float*, const float*, float*, int, int, int);
template void linear_backward_input<double>(const double*, const double*, double*, int, int,
                                            int);
template void linear_backward_weight<float>(const float*, const float*, float*, int, int, int);
template void linear_backward_weight<double>(const double*, const double*, double*, int, int,
                                             int);

}  // namespace sdp::cpu
