#pragma once
// Fused softmax cross-entropy on CUDA: one block per row, the max and the
// sum of exponentials found in one pass over the logits (online softmax, in
// f32), so no [N, V] f32 temporary exists. Arguments are validated by
// kernels/ops_cross_entropy.cpp (logits f32 or bf16; losses, lse f32).
//
// Targets cannot be range-checked on the host without a device-to-host copy
// and a synchronization per call, so the kernels check them: a target at or
// above V gives a NaN loss (forward) and a NaN gradient row (backward), which
// the loss readout reports, rather than a read outside the row.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// logits [N, V], targets [N] i32 -> losses [N] (0 where the target is
// negative), lse [N].
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses,
                           Tensor& lse);
// dlogits [N, V] = (softmax(logits) - onehot(target)) * grad_scale, 0 on
// ignored rows, in the logits' dtype; dlogits may alias logits.
void cross_entropy_backward_input(const Tensor& logits, const Tensor& targets,
                                  const Tensor& lse, double grad_scale, Tensor& dlogits);

}  // namespace sdp::cuda
