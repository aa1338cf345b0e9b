#include "kernels/cpu/linear.h"

#include "kernels/cpu/blas.h"

#include <algorithm>
#include <cstdint>

namespace sdp::cpu {

namespace {

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
  gemm(CblasNoTrans, CblasTrans, n, out, in, T(1), x, ld(in), w, ld(in), T(0), y, ld(out));
}

template <typename T>
void linear_backward_input(const T* dy, const T* w, T* dx, int n, int in, int out) {
  if (n == 0 || in == 0) return;
  if (out == 0) {
    std::fill(dx, dx + static_cast<int64_t>(n) * in, T(0));
    return;
  }
  gemm(CblasNoTrans, CblasNoTrans, n, in, out, T(1), dy, ld(out), w, ld(in), T(0), dx, ld(in));
}

template <typename T>
void linear_backward_weight(const T* dy, const T* x, T* dw, int n, int in, int out) {
  if (n == 0 || in == 0 || out == 0) return;  // nothing to add
  gemm(CblasTrans, CblasNoTrans, out, in, n, T(1), dy, ld(out), x, ld(in), T(1), dw, ld(in));
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
