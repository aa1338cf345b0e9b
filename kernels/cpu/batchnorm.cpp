#include "kernels/cpu/batchnorm.h"

#include <cmath>
#include <cstdint>

#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {

constexpr int64_t kParallelMin = int64_t{1} << 15;  // elements; below, one thread

// Plane (image b, channel c) of a [B, C, S] tensor.
template <typename T>
T* plane(T* t, const BatchNormDims& d, int64_t b, int64_t c) {
  return t + (b * d.channels + c) * d.spatial;
}

// One channel's mean and biased variance, two passes in double, image by
// image.
template <typename T>
[[gnu::always_inline]] inline void channel_moments(const T* x, const BatchNormDims& d,
                                                   int64_t c, double count, double& mean,
                                                   double& var) {
  double total = 0;
  for (int64_t b = 0; b < d.batch; ++b) {
    const T* p = plane(x, d, b, c);
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d.spatial; ++i) s += static_cast<double>(p[i]);
    total += s;
  }
  const double m = total / count;
  double squares = 0;
  for (int64_t b = 0; b < d.batch; ++b) {
    const T* p = plane(x, d, b, c);
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d.spatial; ++i) {
      const double v = static_cast<double>(p[i]) - m;
      s += v * v;
    }
    squares += s;
  }
  mean = m;
  var = squares / count;
}

// sum over one channel of dy and of dy (x - mean), in double.
template <typename T>
[[gnu::always_inline]] inline void channel_dy_sums(const T* dy, const T* x, double mean,
                                                   const BatchNormDims& d, int64_t c,
                                                   double& sum_dy, double& sum_dy_xc) {
  sum_dy = 0;
  sum_dy_xc = 0;
  for (int64_t b = 0; b < d.batch; ++b) {
    const T* g = plane(dy, d, b, c);
    const T* p = plane(x, d, b, c);
    double s = 0, sx = 0;
#pragma omp simd reduction(+ : s, sx)
    for (int64_t i = 0; i < d.spatial; ++i) {
      s += static_cast<double>(g[i]);
      sx += static_cast<double>(g[i]) * (static_cast<double>(p[i]) - mean);
    }
    sum_dy += s;
    sum_dy_xc += sx;
  }
}

// y = (x - shift) * scale + offset over one channel, in T.
template <typename T>
[[gnu::always_inline]] inline void channel_affine(const T* x, T* y, const BatchNormDims& d,
                                                  int64_t c, T shift, T scale, T offset) {
  for (int64_t b = 0; b < d.batch; ++b) {
    const T* p = plane(x, d, b, c);
    T* q = plane(y, d, b, c);
#pragma omp simd
    for (int64_t i = 0; i < d.spatial; ++i) q[i] = (p[i] - shift) * scale + offset;
  }
}

// dx = a dy - b (x - mean) - offset over one channel, in T.
template <typename T>
[[gnu::always_inline]] inline void channel_input_gradient(const T* dy, const T* x, T* dx,
                                                          const BatchNormDims& d, int64_t c,
                                                          T a, T b, T mean, T offset) {
  for (int64_t i = 0; i < d.batch; ++i) {
    const T* g = plane(dy, d, i, c);
    const T* p = plane(x, d, i, c);
    T* out = plane(dx, d, i, c);
#pragma omp simd
    for (int64_t j = 0; j < d.spatial; ++j) out[j] = a * g[j] - b * (p[j] - mean) - offset;
  }
}

// The per-channel passes are memory-bound loops that f32 runs often (every
// ResNet layer); the default x86-64 target would convert to double two
// values at a time, so f32 also gets AVX2 and AVX-512 copies (vec_math.h):
// these overloads, which calls with float pointers pick over the templates.
SDP_MULTIVERSION void channel_moments(const float* x, const BatchNormDims& d, int64_t c,
                                      double count, double& mean, double& var) {
  channel_moments<float>(x, d, c, count, mean, var);
}
SDP_MULTIVERSION void channel_dy_sums(const float* dy, const float* x, double mean,
                                      const BatchNormDims& d, int64_t c, double& sum_dy,
                                      double& sum_dy_xc) {
  channel_dy_sums<float>(dy, x, mean, d, c, sum_dy, sum_dy_xc);
}
SDP_MULTIVERSION void channel_affine(const float* x, float* y, const BatchNormDims& d, int64_t c,
                                     float shift, float scale, float offset) {
  channel_affine<float>(x, y, d, c, shift, scale, offset);
}
SDP_MULTIVERSION void channel_input_gradient(const float* dy, const float* x, float* dx,
                                             const BatchNormDims& d, int64_t c, float a, float b,
                                             float mean, float offset) {
  channel_input_gradient<float>(dy, x, dx, d, c, a, b, mean, offset);
}

bool parallel(const BatchNormDims& d) { return d.batch * d.channels * d.spatial >= kParallelMin; }

}  // namespace

template <typename T>
void batchnorm_forward_train(const T* x, const T* weight, const T* bias, double eps,
                             double momentum, T* y, T* save_mean, T* save_invstd,
                             T* running_mean, T* running_var, const BatchNormDims& d) {
  const int64_t n = d.batch * d.spatial;
  if (n == 0) return;
  const double count = static_cast<double>(n);
  // PyTorch's running variance is unbiased; one value has none, keep the biased 0.
  const double unbias = n > 1 ? count / (count - 1) : 1.0;
#pragma omp parallel for schedule(static) if (parallel(d))
  for (int64_t c = 0; c < d.channels; ++c) {
    double mean = 0, var = 0;
    channel_moments(x, d, c, count, mean, var);
    const double invstd = 1.0 / std::sqrt(var + eps);
    save_mean[c] = static_cast<T>(mean);
    save_invstd[c] = static_cast<T>(invstd);
    if (running_mean != nullptr) {
      running_mean[c] = static_cast<T>((1 - momentum) * running_mean[c] + momentum * mean);
      running_var[c] = static_cast<T>((1 - momentum) * running_var[c] + momentum * var * unbias);
    }
    channel_affine(x, y, d, c, static_cast<T>(mean), static_cast<T>(invstd * weight[c]), bias[c]);
  }
}

template <typename T>
void batchnorm_forward_eval(const T* x, const T* weight, const T* bias, const T* running_mean,
                            const T* running_var, double eps, T* y, const BatchNormDims& d) {
#pragma omp parallel for schedule(static) if (parallel(d))
  for (int64_t c = 0; c < d.channels; ++c) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + eps);
    channel_affine(x, y, d, c, running_mean[c], static_cast<T>(invstd * weight[c]), bias[c]);
  }
}

template <typename T>
void batchnorm_backward_input(const T* dy, const T* x, const T* weight, const T* save_mean,
                              const T* save_invstd, T* dx, const BatchNormDims& d) {
  const int64_t n = d.batch * d.spatial;
  if (n == 0) return;
  const double count = static_cast<double>(n);
#pragma omp parallel for schedule(static) if (parallel(d))
  for (int64_t c = 0; c < d.channels; ++c) {
    const double mean = save_mean[c], invstd = save_invstd[c];
    double sum_dy = 0, sum_dy_xc = 0;
    channel_dy_sums(dy, x, mean, d, c, sum_dy, sum_dy_xc);
    // dx = a dy - b (x - mean) - a mean(dy), with a = weight invstd and
    // b = a invstd mean(dy xhat) = a invstd^2 mean(dy (x - mean)).
    const double a = static_cast<double>(weight[c]) * invstd;
    const T a_t = static_cast<T>(a);
    const T b_t = static_cast<T>(a * invstd * invstd * sum_dy_xc / count);
    const T mean_t = static_cast<T>(mean);
    const T offset_t = static_cast<T>(a * sum_dy / count);
    channel_input_gradient(dy, x, dx, d, c, a_t, b_t, mean_t, offset_t);
  }
}

template <typename T>
void batchnorm_backward_weight(const T* dy, const T* x, const T* save_mean, const T* save_invstd,
                               T* dweight, T* dbias, const BatchNormDims& d) {
#pragma omp parallel for schedule(static) if (parallel(d))
  for (int64_t c = 0; c < d.channels; ++c) {
    double sum_dy = 0, sum_dy_xc = 0;
    channel_dy_sums(dy, x, static_cast<double>(save_mean[c]), d, c, sum_dy, sum_dy_xc);
    dweight[c] += static_cast<T>(sum_dy_xc * static_cast<double>(save_invstd[c]));
    dbias[c] += static_cast<T>(sum_dy);
  }
}

template void batchnorm_forward_train<float>(const float*, const float*, const float*, double,
                                             double, float*, float*, float*, float*, float*,
                                             const BatchNormDims&);
template void batchnorm_forward_train<double>(const double*, const double*, const double*,
                                              double, double, double*, double*, double*,
                                              double*, double*, const BatchNormDims&);
template void batchnorm_forward_eval<float>(const float*, const float*, const float*,
                                            const float*, const float*, double, float*,
                                            const BatchNormDims&);
template void batchnorm_forward_eval<double>(const double*, const double*, const double*,
                                             const double*, const double*, double, double*,
                                             const BatchNormDims&);
template void batchnorm_backward_input<float>(const float*, const float*, const float*,
                                              const float*, const float*, float*,
                                              const BatchNormDims&);
template void batchnorm_backward_input<double>(const double*, const double*, const double*,
                                               const double*, const double*, double*,
                                               const BatchNormDims&);
template void batchnorm_backward_weight<float>(const float*, const float*, const float*,
                                               const float*, float*, float*,
                                               const BatchNormDims&);
template void batchnorm_backward_weight<double>(const double*, const double*, const double*,
                                                const double*, double*, double*,
                                                const BatchNormDims&);

}  // namespace sdp::cpu
