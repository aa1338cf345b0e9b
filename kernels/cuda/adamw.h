#pragma once
// AdamW on CUDA (decoupled weight decay, PyTorch's formula, as the CPU
// kernel): f32 master values, gradients and moments, computed in f32.
// Arguments are validated by kernels/ops_adamw.cpp.
#include <cstdint>
#include <span>

#include "engine/core/tensor.h"

namespace sdp::cuda {

// One step's hyperparameters; step is 1-based (bias correction).
struct AdamWStep {
  double lr, beta1, beta2, eps;
  int64_t step;
};

// Elements [offset, offset + numel) of the flat buffers, with their decay.
struct AdamWRange {
  int64_t offset, numel;
  double weight_decay;
};

// param, grad, m, v: f32, same numel; all elements, one weight decay.
void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                  const AdamWStep& step, double weight_decay);

// The ranges (inside the buffers, not overlapping) in one launch while they
// fit one launch's parameter table (several launches beyond that). When
// `low_precision_copy` (bf16, param's numel) is given, each updated value is
// also written to it rounded to nearest even, in the same pass.
void adamw_update_segments(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                           std::span<const AdamWRange> ranges, const AdamWStep& step,
                           Tensor* low_precision_copy);

}  // namespace sdp::cuda
