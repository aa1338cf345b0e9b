#pragma once
// CUDA token embedding (checked by kernels/ops_embedding.cpp first).
//
// Out-of-range tokens: the tokens live on the device, so the kernels check
// them as they read them: a bad token's row is skipped (no memory outside the
// table is touched) and the first bad position is recorded in a device flag.
// After the launch the op reads the flag back (8 bytes; this waits for the
// compute stream) and fails naming the token and its position, as on the
// CPU. In embedding_backward_weight the rows of valid tokens have then
// already been added to dtable.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// tokens [...] i32, table [V, D] (f32 or bf16), out [..., D] like table.
void embedding_forward(const Tensor& tokens, const Tensor& table, Tensor& out);
// dtable [V, D] f32 += scatter of dout [..., D] (f32 or bf16). Rows hit by
// repeated tokens are summed with f32 atomics: the order of those additions,
// and so the last bits of dtable, may differ between runs.
void embedding_backward_weight(const Tensor& tokens, const Tensor& dout, Tensor& dtable);

}  // namespace sdp::cuda
