#pragma once
// Copies between tensors that may differ in device and dtype at once (a
// device's bf16 parameters into a host f32 checkpoint buffer, host f32
// initial values into device bf16 parameters). For I/O and set-up, not for
// the training step: a host bounce buffer is allocated when both differ.
#include "engine/core/tensor.h"

namespace sdp {

// Same shape (both contiguous); any devices among cpu and cuda (meta: no-op);
// dtypes among f32, f64, bf16.
void stage_copy(const Tensor& src, Tensor& dst);

}  // namespace sdp
