#include "kernels/cpu/swiglu.h"

#include <cmath>

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;

// exp(-g) overflows to inf for very negative g, giving s = 0: the right limit.
template <typename T>
T sigmoid(T g) {
  return T(1) / (T(1) + std::exp(-g));
}
}  // namespace

template <typename T>
void swiglu_forward(const T* gate, const T* up, T* out, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i];
    out[i] = g * sigmoid(g) * up[i];
  }
}

template <typename T>
void swiglu_backward_input(const T* dout, const T* gate, const T* up, T* dgate, T* dup,
                           int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i], u = up[i], d = dout[i];
    const T s = sigmoid(g);
    dgate[i] = d * u * s * (T(1) + g * (T(1) - s));
    dup[i] = d * g * s;
  }
}

template void swiglu_forward<float>(const float*, const float*, float*, int64_t);
template void swiglu_forward<double>(const double*, const double*, double*, int64_t);
template void swiglu_backward_input<float>(const float*, const float*, const float*, float*,
                                           float*, int64_t);
template void swiglu_backward_input<double>(const double*, const double*, const double*,
                                            double*, double*, int64_t);

}  // namespace sdp::cpu
