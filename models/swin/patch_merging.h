#pragma once
// Swin's patch merging, the start of every stage but the first:
//   g = gather of 2 x 2 neighbours [B, H/2, W/2, 4C] (ops::patch_merge_forward),
//   n = LayerNorm(g), z = n R^T with R [2C, 4C] (no bias).
// Its parameters are shared by every subnetwork: a rank that drops the
// stage's first block still needs the resolution and width the next blocks
// read, so the merging runs wherever the block's site runs.
#include <optional>

#include "engine/core/tensor.h"
#include "models/common/parameter_set.h"

namespace sdp::swin {

struct MergeParams {
  int norm_weight = -1, norm_bias = -1;  // [4 Cin]
  int reduction = -1;                    // [Cout, 4 Cin]
  bool present() const { return reduction >= 0; }
};

struct MergeSaved {
  OwnedTensor g;           // [B, H/2, W/2, 4 Cin] gathered
  OwnedTensor mean, rstd;  // [B, H/2, W/2] LayerNorm statistics
  OwnedTensor n;           // [B, H/2, W/2, 4 Cin] normalized (the reduction's input)
};

// x [B, H, W, Cin] -> z [B, H/2, W/2, Cout]; `saved` is filled when given.
OwnedTensor merge_forward(const ParameterSet& p, const MergeParams& m, double eps, const Tensor& x,
                          MergeSaved* saved, Allocator& alloc);
// dz -> dx [B, H, W, Cin] (x_shape); frees what only this pass needs.
OwnedTensor merge_backward_input(const ParameterSet& p, const MergeParams& m, MergeSaved& s,
                                 const Tensor& dz, const Shape& x_shape, Tensor& dn,
                                 Allocator& alloc);
// Weight gradients (+=) from dz and dn (the LayerNorm output's gradient,
// which merge_backward_input wrote), for the trained parameters.
void merge_backward_weight(const ParameterSet& p, const MergeParams& m, const MergeSaved& s,
                           const Tensor& dz, const Tensor& dn);

}  // namespace sdp::swin
