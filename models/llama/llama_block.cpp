#include "models/llama/llama_block.h"

#include <cmath>
#include <string>

#include "kernels/ops.h"

namespace sdp::llama {

namespace {
constexpr MemCategory kSaved = MemCategory::activation;
constexpr MemCategory kScratch = MemCategory::workspace;
}  // namespace

BlockParams LlamaBlock::declare(const LlamaConfig& c, ParameterSet& p, int index, int group) {
  const std::string pre = "model.layers." + std::to_string(index) + ".";
  const int64_t D = c.dim, F = c.ffn_dim, Dh = c.head_dim();
  const int64_t q_out = c.n_heads * Dh, kv_out = c.n_kv_heads * Dh;
  // GPT-2 style scaling of the projections that write into the residual
  // stream keeps its variance from growing with depth.
  const double std = 0.02, out_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layers));
  BlockParams b;
  b.norm1 = p.declare(pre + "input_layernorm.weight", {D}, group, InitKind::ones);
  b.wq = p.declare(pre + "self_attn.q_proj.weight", {q_out, D}, group, InitKind::normal, std);
  b.wk = p.declare(pre + "self_attn.k_proj.weight", {kv_out, D}, group, InitKind::normal, std);
  b.wv = p.declare(pre + "self_attn.v_proj.weight", {kv_out, D}, group, InitKind::normal, std);
  b.wo = p.declare(pre + "self_attn.o_proj.weight", {D, q_out}, group, InitKind::normal, out_std);
  b.norm2 = p.declare(pre + "post_attention_layernorm.weight", {D}, group, InitKind::ones);
  b.wgate = p.declare(pre + "mlp.gate_proj.weight", {F, D}, group, InitKind::normal, std);
  b.wup = p.declare(pre + "mlp.up_proj.weight", {F, D}, group, InitKind::normal, std);
  b.wdown = p.declare(pre + "mlp.down_proj.weight", {D, F}, group, InitKind::normal, out_std);
  return b;
}

LlamaBlock::LlamaBlock(const LlamaConfig& config, ParameterSet& params, int index, int group)
    : config_(config), params_(params), index_(index),
      ids_(declare(config, params, index, group)) {}

OwnedTensor LlamaBlock::forward(OwnedTensor x_in, const BatchShape& shape,
                                const Tensor& rope_cos, const Tensor& rope_sin,
                                Allocator& alloc) {
  const LlamaConfig& c = config_;
  const int64_t N = shape.tokens(), D = c.dim, F = c.ffn_dim, Dh = c.head_dim();
  const int64_t Hq = c.n_heads, Hkv = c.n_kv_heads;
  const DType dt = x_in->dtype();
  const ParameterSet& P = params_;
  shape_ = shape;
  Saved s;
  s.x_in = std::move(x_in);                                 // [N, D]
  s.rstd1 = OwnedTensor(alloc, {N}, dt, kSaved);            // [N]
  s.h1 = OwnedTensor(alloc, {N, D}, dt, kSaved);            // [N, D]
  ops::rmsnorm_forward(*s.x_in, P.param(ids_.norm1), c.norm_eps, *s.h1, *s.rstd1);

  s.q = OwnedTensor(alloc, {N, Hq * Dh}, dt, kSaved);       // [N, Hq*Dh], RoPE applied
  s.k = OwnedTensor(alloc, {N, Hkv * Dh}, dt, kSaved);      // [N, Hkv*Dh], RoPE applied
  s.v = OwnedTensor(alloc, {N, Hkv * Dh}, dt, kSaved);      // [N, Hkv*Dh]
  ops::linear_forward(*s.h1, P.param(ids_.wq), *s.q);
  ops::linear_forward(*s.h1, P.param(ids_.wk), *s.k);
  ops::linear_forward(*s.h1, P.param(ids_.wv), *s.v);
  const Tensor cos = rope_cos.rows(0, shape.seq), sin = rope_sin.rows(0, shape.seq);
  Tensor q4 = s.q->view({shape.batch, shape.seq, Hq, Dh});
  Tensor k4 = s.k->view({shape.batch, shape.seq, Hkv, Dh});
  Tensor v4 = s.v->view({shape.batch, shape.seq, Hkv, Dh});
  ops::rope_forward(q4, cos, sin, q4);
  ops::rope_forward(k4, cos, sin, k4);

  s.attn = OwnedTensor(alloc, {N, Hq * Dh}, dt, kSaved);    // [N, Hq*Dh]
  s.lse = OwnedTensor(alloc, {shape.batch, Hq, shape.seq}, dt, kSaved);  // [B, Hq, T]
  {
    OwnedTensor work(alloc, {ops::attention_workspace_elems(shape.batch, shape.seq, Hq, Hkv, Dh)},
                     dt, kScratch);
    Tensor attn4 = s.attn->view({shape.batch, shape.seq, Hq, Dh});
    ops::attention_forward(q4, k4, v4, attn4, *s.lse, *work);
  }

  s.x_mid = OwnedTensor(alloc, {N, D}, dt, kSaved);         // [N, D] residual after attention
  ops::linear_forward(*s.attn, P.param(ids_.wo), *s.x_mid);
  ops::accumulate(*s.x_mid, *s.x_in);

  s.rstd2 = OwnedTensor(alloc, {N}, dt, kSaved);            // [N]
  s.h2 = OwnedTensor(alloc, {N, D}, dt, kSaved);            // [N, D]
  ops::rmsnorm_forward(*s.x_mid, P.param(ids_.norm2), c.norm_eps, *s.h2, *s.rstd2);
  s.gate = OwnedTensor(alloc, {N, F}, dt, kSaved);          // [N, F]
  s.up = OwnedTensor(alloc, {N, F}, dt, kSaved);            // [N, F]
  s.act = OwnedTensor(alloc, {N, F}, dt, kSaved);           // [N, F] silu(gate) * up
  ops::linear_forward(*s.h2, P.param(ids_.wgate), *s.gate);
  ops::linear_forward(*s.h2, P.param(ids_.wup), *s.up);
  ops::swiglu_forward(*s.gate, *s.up, *s.act);

  OwnedTensor y(alloc, {N, D}, dt, kSaved);                 // [N, D] block output
  ops::linear_forward(*s.act, P.param(ids_.wdown), *y);
  ops::accumulate(*y, *s.x_mid);
  saved_ = std::move(s);
  return y;
}

OwnedTensor LlamaBlock::backward_input(OwnedTensor dy, const Tensor& rope_cos,
                                       const Tensor& rope_sin, bool keep_for_weights,
                                       Allocator& alloc) {
  SDP_CHECK(saved_, "block ", index_, ": backward_input() without a saved forward");
  const LlamaConfig& c = config_;
  const BatchShape& sh = shape_;
  const int64_t N = sh.tokens(), D = c.dim, F = c.ffn_dim, Dh = c.head_dim();
  const int64_t Hq = c.n_heads, Hkv = c.n_kv_heads;
  const DType dt = dy->dtype();
  const ParameterSet& P = params_;
  Saved& s = *saved_;
  // Output gradients live in `activation` when kept for backward_weight(),
  // in `workspace` when they die inside this call.
  const MemCategory keep = keep_for_weights ? kSaved : kScratch;
  OutputGrads g;

  // MLP: y = m + act Wd^T
  OwnedTensor d_act(alloc, {N, F}, dt, kScratch);           // [N, F]
  ops::linear_backward_input(*dy, P.param(ids_.wdown), *d_act);
  g.dgate = OwnedTensor(alloc, {N, F}, dt, keep);           // [N, F]
  g.dup = OwnedTensor(alloc, {N, F}, dt, keep);             // [N, F]
  ops::swiglu_backward_input(*d_act, *s.gate, *s.up, *g.dgate, *g.dup);
  d_act = OwnedTensor();
  g.dh2 = OwnedTensor(alloc, {N, D}, dt, keep);             // [N, D]
  {
    OwnedTensor tmp(alloc, {N, D}, dt, kScratch);           // [N, D]
    ops::linear_backward_input(*g.dgate, P.param(ids_.wgate), *g.dh2);
    ops::linear_backward_input(*g.dup, P.param(ids_.wup), *tmp);
    ops::accumulate(*g.dh2, *tmp);
  }
  g.d_mid = OwnedTensor(alloc, {N, D}, dt, keep);           // [N, D] gradient of m
  ops::rmsnorm_backward_input(*g.dh2, *s.x_mid, P.param(ids_.norm2), *s.rstd2, *g.d_mid);
  ops::accumulate(*g.d_mid, *dy);

  // Attention: m = x + attn Wo^T
  OwnedTensor d_attn(alloc, {N, Hq * Dh}, dt, kScratch);    // [N, Hq*Dh]
  ops::linear_backward_input(*g.d_mid, P.param(ids_.wo), *d_attn);
  g.dq = OwnedTensor(alloc, {N, Hq * Dh}, dt, keep);        // [N, Hq*Dh]
  g.dk = OwnedTensor(alloc, {N, Hkv * Dh}, dt, keep);       // [N, Hkv*Dh]
  g.dv = OwnedTensor(alloc, {N, Hkv * Dh}, dt, keep);       // [N, Hkv*Dh]
  Tensor dq4 = g.dq->view({sh.batch, sh.seq, Hq, Dh});
  Tensor dk4 = g.dk->view({sh.batch, sh.seq, Hkv, Dh});
  Tensor dv4 = g.dv->view({sh.batch, sh.seq, Hkv, Dh});
  {
    OwnedTensor work(alloc, {ops::attention_workspace_elems(sh.batch, sh.seq, Hq, Hkv, Dh)},
                     dt, kScratch);
    ops::attention_backward_input(d_attn->view({sh.batch, sh.seq, Hq, Dh}),
                                  s.q->view({sh.batch, sh.seq, Hq, Dh}),
                                  s.k->view({sh.batch, sh.seq, Hkv, Dh}),
                                  s.v->view({sh.batch, sh.seq, Hkv, Dh}),
                                  s.attn->view({sh.batch, sh.seq, Hq, Dh}), *s.lse, dq4, dk4,
                                  dv4, *work);
  }
  d_attn = OwnedTensor();
  const Tensor cos = rope_cos.rows(0, sh.seq), sin = rope_sin.rows(0, sh.seq);
  ops::rope_backward_input(dq4, cos, sin, dq4);
  ops::rope_backward_input(dk4, cos, sin, dk4);
  g.dh1 = OwnedTensor(alloc, {N, D}, dt, keep);             // [N, D]
  {
    OwnedTensor tmp(alloc, {N, D}, dt, kScratch);           // [N, D]
    ops::linear_backward_input(*g.dq, P.param(ids_.wq), *g.dh1);
    ops::linear_backward_input(*g.dk, P.param(ids_.wk), *tmp);
    ops::accumulate(*g.dh1, *tmp);
    ops::linear_backward_input(*g.dv, P.param(ids_.wv), *tmp);
    ops::accumulate(*g.dh1, *tmp);
  }
  OwnedTensor dx(alloc, {N, D}, dt, kSaved);                // [N, D] gradient of x_in
  ops::rmsnorm_backward_input(*g.dh1, *s.x_in, P.param(ids_.norm1), *s.rstd1, *dx);
  ops::accumulate(*dx, *g.d_mid);

  if (keep_for_weights) {
    g.dy = std::move(dy);
    grads_ = std::move(g);
  } else {
    release();
  }
  return dx;
}

void LlamaBlock::backward_weight() {
  SDP_CHECK(saved_ && grads_, "block ", index_,
            ": backward_weight() needs backward_input(keep_for_weights = true) first");
  const ParameterSet& P = params_;
  const Saved& s = *saved_;
  const OutputGrads& g = *grads_;
  Tensor d_wdown = P.grad(ids_.wdown), d_wgate = P.grad(ids_.wgate), d_wup = P.grad(ids_.wup);
  Tensor d_norm2 = P.grad(ids_.norm2), d_wo = P.grad(ids_.wo), d_wq = P.grad(ids_.wq);
  Tensor d_wk = P.grad(ids_.wk), d_wv = P.grad(ids_.wv), d_norm1 = P.grad(ids_.norm1);
  ops::linear_backward_weight(*g.dy, *s.act, d_wdown);
  ops::linear_backward_weight(*g.dgate, *s.h2, d_wgate);
  ops::linear_backward_weight(*g.dup, *s.h2, d_wup);
  ops::rmsnorm_backward_weight(*g.dh2, *s.x_mid, *s.rstd2, d_norm2);
  ops::linear_backward_weight(*g.d_mid, *s.attn, d_wo);
  ops::linear_backward_weight(*g.dq, *s.h1, d_wq);
  ops::linear_backward_weight(*g.dk, *s.h1, d_wk);
  ops::linear_backward_weight(*g.dv, *s.h1, d_wv);
  ops::rmsnorm_backward_weight(*g.dh1, *s.x_in, *s.rstd1, d_norm1);
  release();
}

void LlamaBlock::release() {
  grads_.reset();
  saved_.reset();
}

size_t LlamaBlock::saved_activation_bytes(const LlamaConfig& c, const BatchShape& s,
                                          DType dtype, const Allocator& alloc) {
  const int64_t N = s.tokens(), D = c.dim, F = c.ffn_dim, Dh = c.head_dim();
  const size_t e = dtype_size(dtype);
  auto bytes = [&](int64_t numel) { return alloc.rounded(static_cast<size_t>(numel) * e); };
  // x_in, h1, x_mid, h2; rstd1, rstd2; q, attn; k, v; lse; gate, up, act
  return 4 * bytes(N * D) + 2 * bytes(N) + 2 * bytes(N * c.n_heads * Dh) +
         2 * bytes(N * c.n_kv_heads * Dh) + bytes(s.batch * c.n_heads * s.seq) + 3 * bytes(N * F);
}

}  // namespace sdp::llama
