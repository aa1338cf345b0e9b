#pragma once
// Small helpers for the test_ops_*.cpp files, on top of test_support.h.
#include <vector>

#include "engine/core/tensor.h"
#include "kernels/ops.h"
#include "test_support.h"

namespace sdp::testing {

// A copy of the f64 tensor `src` in dtype `dtype` (f32 or f64), owned by `arena`.
inline Tensor cast_copy(Arena& arena, const Tensor& src, DType dtype) {
  Tensor out = arena.make(src.shape(), dtype);
  const double* s = src.data<double>();
  for (int64_t i = 0; i < src.numel(); ++i) {
    if (dtype == DType::f64)
      out.data<double>()[i] = s[i];
    else
      out.data<float>()[i] = static_cast<float>(s[i]);
  }
  return out;
}

// Values an op that overwrites its output must not leave behind.
inline void fill_garbage(Tensor& t) { ops::fill(t, 12345.0); }

// Both float dtypes with the relative tolerance a forward pass should meet
// against an f64 reference.
struct DTypeCase {
  DType dtype;
  double tol;
};
inline const DTypeCase kFloatCases[] = {{DType::f64, 1e-12}, {DType::f32, 1e-5}};

}  // namespace sdp::testing
