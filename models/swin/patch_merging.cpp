#include "models/swin/patch_merging.h"

#include "kernels/ops.h"

namespace sdp::swin {

namespace {
constexpr MemCategory kSaved = MemCategory::activation;
constexpr MemCategory kScratch = MemCategory::workspace;

Shape merged_shape(const Shape& x, int64_t channels) {
  return {x[0], x[1] / 2, x[2] / 2, channels};
}
}  // namespace

OwnedTensor merge_forward(const ParameterSet& p, const MergeParams& m, double eps, const Tensor& x,
                          MergeSaved* saved, Allocator& alloc) {
  SDP_CHECK(x.ndim() == 4 && x.size(1) % 2 == 0 && x.size(2) % 2 == 0, "patch merging: input ",
            x.describe(), " must be [B, H, W, C] with H, W even");
  const Tensor red = p.param(m.reduction);  // [Cout, 4 Cin]
  const int64_t Cin4 = 4 * x.size(3), Cout = red.size(0);
  const DType dt = x.dtype(), st = accum_dtype(dt);
  const MemCategory cat = saved ? kSaved : kScratch;
  const Shape gs = merged_shape(x.shape(), Cin4);
  OwnedTensor g(alloc, gs, dt, cat);  // [B, H/2, W/2, 4 Cin]
  ops::patch_merge_forward(x, *g);
  OwnedTensor mean(alloc, {gs[0], gs[1], gs[2]}, st, cat);  // [B, H/2, W/2]
  OwnedTensor rstd(alloc, {gs[0], gs[1], gs[2]}, st, cat);
  OwnedTensor n(alloc, gs, dt, cat);  // [B, H/2, W/2, 4 Cin]
  ops::layernorm_forward(*g, p.param(m.norm_weight), p.param(m.norm_bias), eps, *n, *mean, *rstd);
  OwnedTensor z(alloc, merged_shape(x.shape(), Cout), dt, kSaved);  // [B, H/2, W/2, Cout]
  const int64_t rows = gs[0] * gs[1] * gs[2];
  Tensor z2 = z->view({rows, Cout});
  ops::linear_forward(n->view({rows, Cin4}), red, z2);
  if (saved) {
    saved->g = std::move(g);
    saved->mean = std::move(mean);
    saved->rstd = std::move(rstd);
    saved->n = std::move(n);
  }
  return z;
}

OwnedTensor merge_backward_input(const ParameterSet& p, const MergeParams& m, MergeSaved& s,
                                 const Tensor& dz, const Shape& x_shape, Tensor& dn,
                                 Allocator& alloc) {
  const Shape gs = s.g->shape();
  const int64_t rows = gs[0] * gs[1] * gs[2];
  Tensor dn2 = dn.view({rows, gs[3]});
  ops::linear_backward_input(dz.view({rows, dz.size(3)}), p.param(m.reduction), dn2);
  OwnedTensor dg(alloc, gs, dz.dtype(), kScratch);  // [B, H/2, W/2, 4 Cin]
  ops::layernorm_backward_input(dn, *s.g, p.param(m.norm_weight), *s.mean, *s.rstd, *dg);
  OwnedTensor dx(alloc, x_shape, dz.dtype(), kSaved);  // [B, H, W, Cin]
  ops::patch_merge_backward_input(*dg, *dx);
  return dx;
}

void merge_backward_weight(const ParameterSet& p, const MergeParams& m, const MergeSaved& s,
                           const Tensor& dz, const Tensor& dn) {
  const Shape gs = s.g->shape();
  const int64_t rows = gs[0] * gs[1] * gs[2];
  if (p.is_trained(m.reduction)) {
    Tensor dw = p.grad(m.reduction);
    ops::linear_backward_weight(dz.view({rows, dz.size(3)}), s.n->view({rows, gs[3]}), dw);
  }
  if (p.is_trained(m.norm_weight)) {
    Tensor dw = p.grad(m.norm_weight), db = p.grad(m.norm_bias);
    ops::layernorm_backward_weight(dn, *s.g, *s.mean, *s.rstd, dw, db);
  }
}

}  // namespace sdp::swin
