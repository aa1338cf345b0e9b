#pragma once
// Helpers shared by the op and model tests: an arena that owns test tensors,
// seeded random fills, central finite differences in f64, and error metrics.
#include <cmath>
#include <cstdint>
#include <deque>

#include <omp.h>
#include <random>
#include <vector>

#include "engine/core/tensor.h"

namespace sdp::testing {

// ctest runs test processes side by side with one OpenMP thread each (no
// oversubscription on small machines); tests of the parallel code paths ask
// for more threads for their own duration with this guard.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : previous_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(previous_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int previous_;
};

// Owns every tensor a test makes; all on the CPU allocator it exposes.
class Arena {
 public:
  Tensor make(Shape shape, DType dtype = DType::f64,
              MemCategory category = MemCategory::activation) {
    owned_.emplace_back(alloc_, shape, dtype, category);
    return owned_.back().view;
  }
  CpuAllocator& allocator() { return alloc_; }

 private:
  CpuAllocator alloc_;
  std::deque<OwnedTensor> owned_;
};

// Fills a floating tensor with uniform values in [lo, hi).
inline void fill_uniform(const Tensor& t, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  const int64_t n = t.numel();
  if (t.dtype() == DType::f64) {
    double* p = t.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
  } else {
    float* p = t.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(dist(rng));
  }
}

// Fills an i32 tensor with integers in [0, upper).
inline void fill_tokens(const Tensor& t, uint64_t seed, int32_t upper) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, upper - 1);
  int32_t* p = t.data<int32_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
}

inline std::vector<double> to_vector(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = t.dtype() == DType::f64 ? t.data<double>()[i] : t.data<float>()[i];
  return out;
}

// d loss / d x by central differences, perturbing each element of the f64
// contiguous tensor x in place (restored afterwards). loss() must recompute
// everything that depends on x.
template <typename LossFn>
std::vector<double> numeric_gradient_at(const Tensor& x, LossFn&& loss,
                                        const std::vector<int64_t>& indices, double h = 1e-6) {
  double* p = x.data<double>();
  std::vector<double> grad;
  for (int64_t i : indices) {
    const double saved = p[i];
    p[i] = saved + h;
    const double up = loss();
    p[i] = saved - h;
    const double down = loss();
    p[i] = saved;
    grad.push_back((up - down) / (2 * h));
  }
  return grad;
}

template <typename LossFn>
std::vector<double> numeric_gradient(const Tensor& x, LossFn&& loss, double h = 1e-6) {
  std::vector<int64_t> all(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) all[static_cast<size_t>(i)] = i;
  return numeric_gradient_at(x, loss, all, h);
}

// max |a - b| / max(max |b|, floor): a relative error that does not blow up on
// entries near zero.
inline double max_rel_error(const std::vector<double>& a, const std::vector<double>& b,
                            double floor = 1e-12) {
  double diff = 0, scale = floor;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  if (a.size() != b.size()) return INFINITY;
  return diff / scale;
}

// sum_i w_i * t_i: the scalar "loss" that turns an op's output into a number
// whose gradient with respect to the output is w.
inline double weighted_sum(const Tensor& t, const Tensor& w) {
  const auto a = to_vector(t), b = to_vector(w);
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace sdp::testing
