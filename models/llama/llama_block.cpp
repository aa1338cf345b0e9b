#include "models/llama/llama_block.h"

#include <string>

#include "kernels/ops.h"
#include "models/common/packed_pieces.h"

namespace sdp::llama {

namespace {
constexpr MemCategory kSaved = MemCategory::activation;
constexpr MemCategory kScratch = MemCategory::workspace;

int64_t pack_size(const GroupPack& pack) { return static_cast<int64_t>(pack.groups.size()); }

OwnedTensor copy_of(const Tensor& x, Allocator& alloc, MemCategory category) {
  OwnedTensor out(alloc, x.shape(), x.dtype(), category);
  ops::copy(x, *out);
  return out;
}
}  // namespace

LlamaBlock::LlamaBlock(const LlamaConfig& config, ParameterSet& params, const RopeTables& rope,
                       int index, BlockParams ids)
    : config_(config), params_(params), rope_(rope), index_(index), ids_(std::move(ids)) {
  SDP_CHECK(!ids_.heads.empty() && !ids_.ffn.empty(), "block ", index, " declares no groups");
}

int64_t LlamaBlock::kv_heads_per_group() const {
  return config_.n_kv_heads / static_cast<int64_t>(ids_.heads.size());
}
int64_t LlamaBlock::q_heads_per_group() const {
  return kv_heads_per_group() * (config_.n_heads / config_.n_kv_heads);
}
int64_t LlamaBlock::units_per_group() const {
  return config_.ffn_dim / static_cast<int64_t>(ids_.ffn.size());
}

bool LlamaBlock::runs() const {
  if (params_.is_materialized(ids_.norm1)) return true;
  for (const auto& h : ids_.heads)
    if (params_.is_materialized(h.wq)) return true;
  for (const auto& f : ids_.ffn)
    if (params_.is_materialized(f.wgate)) return true;
  return false;
}

bool LlamaBlock::trains() const {
  if (params_.is_trained(ids_.norm1)) return true;
  for (const auto& h : ids_.heads)
    if (params_.is_trained(h.wq)) return true;
  for (const auto& f : ids_.ffn)
    if (params_.is_trained(f.wgate)) return true;
  return false;
}

std::vector<int> LlamaBlock::param_ids() const {
  std::vector<int> ids{ids_.norm1, ids_.norm2};
  for (const HeadGroupParams& h : ids_.heads)
    for (int id : {h.wq, h.wk, h.wv, h.wo}) ids.push_back(id);
  for (const FfnGroupParams& f : ids_.ffn)
    for (int id : {f.wgate, f.wup, f.wdown}) ids.push_back(id);
  return ids;
}

std::vector<GroupPack> LlamaBlock::head_packs() const {
  std::vector<int> first;  // [head groups]: each group's wq piece
  for (const HeadGroupParams& h : ids_.heads) first.push_back(h.wq);
  return held_group_packs(params_, first);
}

std::vector<GroupPack> LlamaBlock::ffn_packs() const {
  std::vector<int> first;  // [FFN groups]: each group's wgate piece
  for (const FfnGroupParams& f : ids_.ffn) first.push_back(f.wgate);
  return held_group_packs(params_, first);
}

std::vector<int> LlamaBlock::head_ids(const GroupPack& pack, int HeadGroupParams::*w) const {
  std::vector<int> ids;
  for (int g : pack.groups) ids.push_back(ids_.heads[static_cast<size_t>(g)].*w);
  return ids;
}

std::vector<int> LlamaBlock::ffn_ids(const GroupPack& pack, int FfnGroupParams::*w) const {
  std::vector<int> ids;
  for (int g : pack.groups) ids.push_back(ids_.ffn[static_cast<size_t>(g)].*w);
  return ids;
}

LlamaBlock::Context& LlamaBlock::context_of(BlockContext& c) const {
  auto* ctx = dynamic_cast<Context*>(&c);
  SDP_CHECK(ctx, "block ", index_, ": the context is not a LLaMA block's");
  return *ctx;
}

TrunkBlock::Forward LlamaBlock::forward(const Tensor& x, BlockMode mode, Allocator& alloc) {
  const LlamaConfig& c = config_;
  SDP_CHECK(x.ndim() == 3 && x.size(2) == c.dim, "block ", index_, ": input ", x.describe(),
            " must be [B, T, ", c.dim, "]");
  const BatchShape shape{x.size(0), x.size(1)};
  const int64_t N = shape.tokens(), D = c.dim, Dh = c.head_dim();
  const DType dt = x.dtype();
  const DType st = accum_dtype(dt);  // statistics: rstd, lse
  const ParameterSet& P = params_;
  const Tensor& rope_cos = *rope_.cos;
  const Tensor& rope_sin = *rope_.sin;
  const Tensor x_in = x.view({N, D});                       // [N, D]
  Saved s;

  // ---- attention over the held head groups
  OwnedTensor attn_out;                                     // [N, D] sum of a_g Wo_g^T
  for (GroupPack& pack : head_packs()) {
    const int64_t qh = q_heads_per_group() * pack_size(pack);   // query heads of the pack
    const int64_t kvh = kv_heads_per_group() * pack_size(pack); // KV heads of the pack
    if (!s.h1) {
      s.rstd1 = OwnedTensor(alloc, {N}, st, kSaved);        // [N]
      s.h1 = OwnedTensor(alloc, {N, D}, dt, kSaved);        // [N, D]
      ops::rmsnorm_forward(x_in, P.param(ids_.norm1), c.norm_eps, *s.h1, *s.rstd1);
    }
    HeadSaved hs;
    hs.q = OwnedTensor(alloc, {N, qh * Dh}, dt, kSaved);    // [N, qh*Dh], RoPE applied
    hs.k = OwnedTensor(alloc, {N, kvh * Dh}, dt, kSaved);   // [N, kvh*Dh], RoPE applied
    hs.v = OwnedTensor(alloc, {N, kvh * Dh}, dt, kSaved);   // [N, kvh*Dh]
    ops::linear_forward(*s.h1, *pack_values(P, head_ids(pack, &HeadGroupParams::wq), alloc), *hs.q);
    ops::linear_forward(*s.h1, *pack_values(P, head_ids(pack, &HeadGroupParams::wk), alloc), *hs.k);
    ops::linear_forward(*s.h1, *pack_values(P, head_ids(pack, &HeadGroupParams::wv), alloc), *hs.v);
    const Tensor cos = rope_cos.rows(0, shape.seq), sin = rope_sin.rows(0, shape.seq);
    Tensor q4 = hs.q->view({shape.batch, shape.seq, qh, Dh});
    Tensor k4 = hs.k->view({shape.batch, shape.seq, kvh, Dh});
    Tensor v4 = hs.v->view({shape.batch, shape.seq, kvh, Dh});
    ops::rope_forward(q4, cos, sin, q4);
    ops::rope_forward(k4, cos, sin, k4);
    hs.attn = OwnedTensor(alloc, {N, qh * Dh}, dt, kSaved);             // [N, qh*Dh]
    hs.lse = OwnedTensor(alloc, {shape.batch, qh, shape.seq}, st, kSaved);  // [B, qh, T]
    {
      OwnedTensor work(alloc,
                       {ops::attention_workspace_elems(shape.batch, shape.seq, qh, kvh, Dh,
                                                       alloc.target_device())},
                       dt, kScratch);
      Tensor attn4 = hs.attn->view({shape.batch, shape.seq, qh, Dh});
      ops::attention_forward(q4, k4, v4, attn4, *hs.lse, *work);
    }
    attn_out = OwnedTensor(alloc, {N, D}, dt, kSaved);      // [N, D]
    ops::linear_forward(*hs.attn, *pack_values(P, head_ids(pack, &HeadGroupParams::wo), alloc),
                        *attn_out);
    hs.pack = std::move(pack);
    s.heads.push_back(std::move(hs));
  }
  if (attn_out) {
    ops::accumulate(*attn_out, x_in);
    s.x_mid = std::move(attn_out);                          // [N, D] residual after attention
  } else {
    s.x_mid = copy_of(x_in, alloc, kSaved);                 // no head held: m = x
  }

  // ---- FFN over the held unit groups
  OwnedTensor y;                                            // [N, D] block output
  for (GroupPack& pack : ffn_packs()) {
    const int64_t fw = units_per_group() * pack_size(pack);  // FFN units of the pack
    if (!s.h2) {
      s.rstd2 = OwnedTensor(alloc, {N}, st, kSaved);        // [N]
      s.h2 = OwnedTensor(alloc, {N, D}, dt, kSaved);        // [N, D]
      ops::rmsnorm_forward(*s.x_mid, P.param(ids_.norm2), c.norm_eps, *s.h2, *s.rstd2);
    }
    FfnSaved fs;
    fs.gate = OwnedTensor(alloc, {N, fw}, dt, kSaved);      // [N, fw]
    fs.up = OwnedTensor(alloc, {N, fw}, dt, kSaved);        // [N, fw]
    fs.act = OwnedTensor(alloc, {N, fw}, dt, kSaved);       // [N, fw]
    ops::linear_forward(*s.h2, *pack_values(P, ffn_ids(pack, &FfnGroupParams::wgate), alloc),
                        *fs.gate);
    ops::linear_forward(*s.h2, *pack_values(P, ffn_ids(pack, &FfnGroupParams::wup), alloc),
                        *fs.up);
    ops::swiglu_forward(*fs.gate, *fs.up, *fs.act);
    y = OwnedTensor(alloc, {N, D}, dt, kSaved);             // [N, D]
    ops::linear_forward(*fs.act, *pack_values(P, ffn_ids(pack, &FfnGroupParams::wdown), alloc),
                        *y);
    fs.pack = std::move(pack);
    s.ffn.push_back(std::move(fs));
  }
  if (y) {
    ops::accumulate(*y, *s.x_mid);
  } else {
    y = copy_of(*s.x_mid, alloc, kSaved);                   // no FFN unit held: y = m
  }
  y.view = y->view({shape.batch, shape.seq, D});            // [B, T, D]
  Forward out;
  out.y = std::move(y);
  if (mode != BlockMode::eval) {
    auto ctx = std::make_unique<Context>();
    ctx->shape = shape;
    ctx->saved = std::move(s);
    out.saved = std::move(ctx);
  }
  return out;
}

OwnedTensor LlamaBlock::backward_input(BlockContext& saved, const Tensor& x, const Tensor* y,
                                       OwnedTensor dy, bool keep_for_weights, Allocator& alloc) {
  (void)y;  // the block's backward does not read its output
  Context& ctx = context_of(saved);
  SDP_CHECK(ctx.saved && !ctx.grads, "block ", index_,
            ": backward_input() needs a saved forward (once)");
  const BatchShape sh = ctx.shape;
  const int64_t N = sh.tokens(), D = config_.dim, Dh = config_.head_dim();
  const DType dt = dy->dtype();
  const ParameterSet& P = params_;
  const Tensor& rope_cos = *rope_.cos;
  const Tensor& rope_sin = *rope_.sin;
  const Tensor x_in = x.view({N, D});                       // [N, D]
  dy.view = dy->view({N, D});                              // [N, D]
  Saved& s = *ctx.saved;
  // Output gradients live in `activation` when kept for backward_weight(),
  // in `workspace` when they die inside this call.
  const MemCategory keep = keep_for_weights ? kSaved : kScratch;
  OutputGrads g;

  // ---- FFN: y = m + sum_g act_g Wd_g^T
  for (const FfnSaved& fs : s.ffn) {
    const int64_t fw = fs.gate->size(1);                    // FFN units of the pack
    const MemCategory mine = keep_for_weights && fs.pack.any_trained() ? kSaved : kScratch;
    OwnedTensor d_act(alloc, {N, fw}, dt, kScratch);        // [N, fw]
    ops::linear_backward_input(
        *dy, *pack_values(P, ffn_ids(fs.pack, &FfnGroupParams::wdown), alloc), *d_act);
    FfnGrads fg;
    fg.dgate = OwnedTensor(alloc, {N, fw}, dt, mine);       // [N, fw]
    fg.dup = OwnedTensor(alloc, {N, fw}, dt, mine);         // [N, fw]
    ops::swiglu_backward_input(*d_act, *fs.gate, *fs.up, *fg.dgate, *fg.dup);
    d_act = OwnedTensor();
    g.dh2 = OwnedTensor(alloc, {N, D}, dt, keep);           // [N, D]
    ops::linear_backward_input(
        *fg.dgate, *pack_values(P, ffn_ids(fs.pack, &FfnGroupParams::wgate), alloc), *g.dh2);
    OwnedTensor tmp(alloc, {N, D}, dt, kScratch);           // [N, D]
    ops::linear_backward_input(
        *fg.dup, *pack_values(P, ffn_ids(fs.pack, &FfnGroupParams::wup), alloc), *tmp);
    ops::accumulate(*g.dh2, *tmp);
    if (mine == kScratch) fg = FfnGrads();
    g.ffn.push_back(std::move(fg));
  }
  if (g.dh2) {
    g.d_mid = OwnedTensor(alloc, {N, D}, dt, keep);         // [N, D] gradient of m
    ops::rmsnorm_backward_input(*g.dh2, *s.x_mid, P.param(ids_.norm2), *s.rstd2, *g.d_mid);
    ops::accumulate(*g.d_mid, *dy);
  } else {
    g.d_mid = copy_of(*dy, alloc, keep);
  }

  // ---- attention: m = x + sum_g a_g Wo_g^T
  const Tensor cos = rope_cos.rows(0, sh.seq), sin = rope_sin.rows(0, sh.seq);
  for (const HeadSaved& hs : s.heads) {
    const int64_t qh = hs.lse->size(1), kvh = hs.k->size(1) / Dh;  // heads of the pack
    const MemCategory mine = keep_for_weights && hs.pack.any_trained() ? kSaved : kScratch;
    OwnedTensor d_attn(alloc, {N, qh * Dh}, dt, kScratch);  // [N, qh*Dh]
    ops::linear_backward_input(
        *g.d_mid, *pack_values(P, head_ids(hs.pack, &HeadGroupParams::wo), alloc), *d_attn);
    HeadGrads hg;
    hg.dq = OwnedTensor(alloc, {N, qh * Dh}, dt, mine);     // [N, qh*Dh]
    hg.dk = OwnedTensor(alloc, {N, kvh * Dh}, dt, mine);    // [N, kvh*Dh]
    hg.dv = OwnedTensor(alloc, {N, kvh * Dh}, dt, mine);    // [N, kvh*Dh]
    Tensor dq4 = hg.dq->view({sh.batch, sh.seq, qh, Dh});
    Tensor dk4 = hg.dk->view({sh.batch, sh.seq, kvh, Dh});
    Tensor dv4 = hg.dv->view({sh.batch, sh.seq, kvh, Dh});
    {
      OwnedTensor work(alloc,
                       {ops::attention_workspace_elems(sh.batch, sh.seq, qh, kvh, Dh,
                                                       alloc.target_device())},
                       dt, kScratch);
      ops::attention_backward_input(d_attn->view({sh.batch, sh.seq, qh, Dh}),
                                    hs.q->view({sh.batch, sh.seq, qh, Dh}),
                                    hs.k->view({sh.batch, sh.seq, kvh, Dh}),
                                    hs.v->view({sh.batch, sh.seq, kvh, Dh}),
                                    hs.attn->view({sh.batch, sh.seq, qh, Dh}), *hs.lse, dq4,
                                    dk4, dv4, *work);
    }
    d_attn = OwnedTensor();
    ops::rope_backward_input(dq4, cos, sin, dq4);
    ops::rope_backward_input(dk4, cos, sin, dk4);
    g.dh1 = OwnedTensor(alloc, {N, D}, dt, keep);           // [N, D]
    ops::linear_backward_input(
        *hg.dq, *pack_values(P, head_ids(hs.pack, &HeadGroupParams::wq), alloc), *g.dh1);
    OwnedTensor tmp(alloc, {N, D}, dt, kScratch);           // [N, D]
    ops::linear_backward_input(
        *hg.dk, *pack_values(P, head_ids(hs.pack, &HeadGroupParams::wk), alloc), *tmp);
    ops::accumulate(*g.dh1, *tmp);
    ops::linear_backward_input(
        *hg.dv, *pack_values(P, head_ids(hs.pack, &HeadGroupParams::wv), alloc), *tmp);
    ops::accumulate(*g.dh1, *tmp);
    if (mine == kScratch) hg = HeadGrads();
    g.heads.push_back(std::move(hg));
  }
  OwnedTensor dx;                                           // [N, D] gradient of x_in
  if (g.dh1) {
    dx = OwnedTensor(alloc, {N, D}, dt, kSaved);
    ops::rmsnorm_backward_input(*g.dh1, x_in, P.param(ids_.norm1), *s.rstd1, *dx);
    ops::accumulate(*dx, *g.d_mid);
  } else {
    dx = copy_of(*g.d_mid, alloc, kSaved);
  }

  if (keep_for_weights) {
    g.dy = std::move(dy);
    ctx.grads = std::move(g);
  } else {
    ctx.saved.reset();
  }
  dx.view = dx->view({sh.batch, sh.seq, D});                // [B, T, D]
  return dx;
}

void LlamaBlock::add_weight_grad(const GroupPack& pack, const std::vector<int>& ids,
                                 const Tensor& dy, const Tensor& in, bool rows_hold_groups,
                                 Allocator& alloc) const {
  const ParameterSet& P = params_;
  const std::vector<int> mine = trained_ids(pack, ids);
  PackedTensor dw = pack_grads(P, mine, alloc);
  if (rows_hold_groups)
    ops::linear_backward_weight(*trained_share(pack, dy, 1, alloc), in, dw.view);
  else
    ops::linear_backward_weight(dy, *trained_share(pack, in, 1, alloc), dw.view);
  add_packed_grads(P, mine, dw, alloc);
}

void LlamaBlock::backward_weight(BlockContext& saved, const Tensor& x, Allocator& alloc) {
  Context& ctx = context_of(saved);
  SDP_CHECK(ctx.saved && ctx.grads, "block ", index_,
            ": backward_weight() needs backward_input(keep_for_weights = true) first");
  const ParameterSet& P = params_;
  const Saved& s = *ctx.saved;
  const OutputGrads& g = *ctx.grads;
  const Tensor x_in = x.view({ctx.shape.tokens(), config_.dim});  // [N, D]
  for (size_t i = 0; i < s.ffn.size(); ++i) {
    const GroupPack& pack = s.ffn[i].pack;
    if (!pack.any_trained()) continue;
    add_weight_grad(pack, ffn_ids(pack, &FfnGroupParams::wdown), *g.dy, *s.ffn[i].act, false,
                    alloc);
    add_weight_grad(pack, ffn_ids(pack, &FfnGroupParams::wgate), *g.ffn[i].dgate, *s.h2, true,
                    alloc);
    add_weight_grad(pack, ffn_ids(pack, &FfnGroupParams::wup), *g.ffn[i].dup, *s.h2, true, alloc);
  }
  if (g.dh2 && P.is_trained(ids_.norm2)) {
    Tensor d_norm2 = P.grad(ids_.norm2);
    ops::rmsnorm_backward_weight(*g.dh2, *s.x_mid, *s.rstd2, d_norm2);
  }
  for (size_t i = 0; i < s.heads.size(); ++i) {
    const GroupPack& pack = s.heads[i].pack;
    if (!pack.any_trained()) continue;
    add_weight_grad(pack, head_ids(pack, &HeadGroupParams::wo), *g.d_mid, *s.heads[i].attn,
                    false, alloc);
    add_weight_grad(pack, head_ids(pack, &HeadGroupParams::wq), *g.heads[i].dq, *s.h1, true,
                    alloc);
    add_weight_grad(pack, head_ids(pack, &HeadGroupParams::wk), *g.heads[i].dk, *s.h1, true,
                    alloc);
    add_weight_grad(pack, head_ids(pack, &HeadGroupParams::wv), *g.heads[i].dv, *s.h1, true,
                    alloc);
  }
  if (g.dh1 && P.is_trained(ids_.norm1)) {
    Tensor d_norm1 = P.grad(ids_.norm1);
    ops::rmsnorm_backward_weight(*g.dh1, x_in, *s.rstd1, d_norm1);
  }
  ctx.grads.reset();
  ctx.saved.reset();
}

void LlamaBlock::backward_weight_batched(const std::vector<BlockContext*>& saved,
                                         const std::vector<const Tensor*>& x, Allocator& alloc) {
  SDP_CHECK(saved.size() == x.size(), "block ", index_, ": backward_weight_batched() got ",
            saved.size(), " contexts and ", x.size(), " inputs");
  if (saved.size() < 2) {
    for (size_t k = 0; k < saved.size(); ++k) backward_weight(*saved[k], *x[k], alloc);
    return;
  }
  std::vector<Context*> ctxs;
  int64_t rows = 0;  // tokens of every micro-batch
  for (BlockContext* c : saved) {
    Context& ctx = context_of(*c);
    SDP_CHECK(ctx.saved && ctx.grads, "block ", index_,
              ": backward_weight_batched() needs backward_input(keep_for_weights = true) of "
              "every micro-batch first");
    ctxs.push_back(&ctx);
    rows += ctx.shape.tokens();
  }
  const Context& first = *ctxs.front();
  const size_t ffn_packs = first.saved->ffn.size(), head_packs = first.saved->heads.size();
  for (const Context* c : ctxs)
    SDP_CHECK(c->saved->ffn.size() == ffn_packs && c->saved->heads.size() == head_packs,
              "block ", index_, ": batched weight gradients of micro-batches that hold different ",
              "groups");
  const ParameterSet& P = params_;
  // Every micro-batch's `piece` [N_k, cols], one under another: [rows,
  // cols] workspace. Each piece has no other use left, so it is freed once
  // copied.
  auto concat = [&](auto piece) {
    OwnedTensor out;
    int64_t at = 0;
    for (Context* c : ctxs) {
      OwnedTensor& t = piece(*c);
      const int64_t n = c->shape.tokens();
      const Tensor src = t->view({n, t->numel() / n});  // [N_k, cols]
      if (!out) out = OwnedTensor(alloc, {rows, src.size(1)}, src.dtype(), kScratch);
      Tensor dst = out->rows(at, n);
      ops::copy(src, dst);
      at += n;
      t = OwnedTensor();
    }
    return out;
  };
  for (size_t i = 0; i < ffn_packs; ++i) {
    const GroupPack& pack = first.saved->ffn[i].pack;
    if (!pack.any_trained()) continue;
    {
      OwnedTensor dy = concat([](Context& c) -> OwnedTensor& { return c.grads->dy; });
      OwnedTensor act = concat([i](Context& c) -> OwnedTensor& { return c.saved->ffn[i].act; });
      add_weight_grad(pack, ffn_ids(pack, &FfnGroupParams::wdown), *dy, *act, false, alloc);
    }
    OwnedTensor h2 = concat([](Context& c) -> OwnedTensor& { return c.saved->h2; });
    {
      OwnedTensor dgate =
          concat([i](Context& c) -> OwnedTensor& { return c.grads->ffn[i].dgate; });
      add_weight_grad(pack, ffn_ids(pack, &FfnGroupParams::wgate), *dgate, *h2, true, alloc);
    }
    OwnedTensor dup = concat([i](Context& c) -> OwnedTensor& { return c.grads->ffn[i].dup; });
    add_weight_grad(pack, ffn_ids(pack, &FfnGroupParams::wup), *dup, *h2, true, alloc);
  }
  for (size_t k = 0; k < ctxs.size(); ++k) {
    const Context& c = *ctxs[k];
    if (c.grads->dh2 && P.is_trained(ids_.norm2)) {
      Tensor d_norm2 = P.grad(ids_.norm2);
      ops::rmsnorm_backward_weight(*c.grads->dh2, *c.saved->x_mid, *c.saved->rstd2, d_norm2);
    }
  }
  for (size_t i = 0; i < head_packs; ++i) {
    const GroupPack& pack = first.saved->heads[i].pack;
    if (!pack.any_trained()) continue;
    {
      OwnedTensor d_mid = concat([](Context& c) -> OwnedTensor& { return c.grads->d_mid; });
      OwnedTensor attn =
          concat([i](Context& c) -> OwnedTensor& { return c.saved->heads[i].attn; });
      add_weight_grad(pack, head_ids(pack, &HeadGroupParams::wo), *d_mid, *attn, false, alloc);
    }
    OwnedTensor h1 = concat([](Context& c) -> OwnedTensor& { return c.saved->h1; });
    {
      OwnedTensor dq = concat([i](Context& c) -> OwnedTensor& { return c.grads->heads[i].dq; });
      add_weight_grad(pack, head_ids(pack, &HeadGroupParams::wq), *dq, *h1, true, alloc);
    }
    {
      OwnedTensor dk = concat([i](Context& c) -> OwnedTensor& { return c.grads->heads[i].dk; });
      add_weight_grad(pack, head_ids(pack, &HeadGroupParams::wk), *dk, *h1, true, alloc);
    }
    OwnedTensor dv = concat([i](Context& c) -> OwnedTensor& { return c.grads->heads[i].dv; });
    add_weight_grad(pack, head_ids(pack, &HeadGroupParams::wv), *dv, *h1, true, alloc);
  }
  for (size_t k = 0; k < ctxs.size(); ++k) {
    Context& c = *ctxs[k];
    if (c.grads->dh1 && P.is_trained(ids_.norm1)) {
      Tensor d_norm1 = P.grad(ids_.norm1);
      const Tensor x_in = x[k]->view({c.shape.tokens(), config_.dim});  // [N, D]
      ops::rmsnorm_backward_weight(*c.grads->dh1, x_in, *c.saved->rstd1, d_norm1);
    }
    c.grads.reset();
    c.saved.reset();
  }
}

size_t LlamaBlock::saved_context_bytes(const BatchShape& s, DType dtype,
                                          const Allocator& alloc) const {
  const LlamaConfig& c = config_;
  const int64_t N = s.tokens(), D = c.dim, Dh = c.head_dim();
  const int64_t qh = q_heads_per_group(), kvh = kv_heads_per_group(), fw = units_per_group();
  const size_t e = dtype_size(dtype), es = dtype_size(accum_dtype(dtype));
  auto bytes = [&](int64_t numel) { return alloc.rounded(static_cast<size_t>(numel) * e); };
  // Statistics (rstd, lse) are kept in accum_dtype: f32 next to bf16.
  auto stat_bytes = [&](int64_t numel) { return alloc.rounded(static_cast<size_t>(numel) * es); };
  int heads = 0, ffn = 0;
  for (const auto& h : ids_.heads) heads += params_.is_materialized(h.wq);
  for (const auto& f : ids_.ffn) ffn += params_.is_materialized(f.wgate);
  size_t total = bytes(N * D);                                  // x_mid
  if (heads > 0) total += bytes(N * D) + stat_bytes(N);         // h1, rstd1
  if (ffn > 0) total += bytes(N * D) + stat_bytes(N);           // h2, rstd2
  // The held head groups as one pack: q, attn; k, v; lse. The FFN units: gate, up, act.
  if (heads > 0)
    total += 2 * bytes(N * heads * qh * Dh) + 2 * bytes(N * heads * kvh * Dh) +
             stat_bytes(s.batch * heads * qh * s.seq);
  if (ffn > 0) total += 3 * bytes(N * ffn * fw);
  return total;
}

}  // namespace sdp::llama
