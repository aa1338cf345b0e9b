#include "models/swin/swin_block.h"

#include <cmath>
#include <utility>

#include "engine/core/counter_rng.h"
#include "kernels/ops.h"

namespace sdp::swin {

namespace {
constexpr MemCategory kSaved = MemCategory::activation;
constexpr MemCategory kScratch = MemCategory::workspace;

// sum = part, or sum += part once it exists: the groups' contributions in
// group order.
void add_into(OwnedTensor& sum, OwnedTensor part) {
  if (!sum) {
    sum = std::move(part);
  } else {
    ops::accumulate(*sum, *part);
  }
}

// Parameters (or their gradients) declared one after another in one storage
// group, seen as one tensor of `shape`: the q, k and v pieces of a head group.
Tensor joined(const std::vector<Tensor>& parts, const Shape& shape) {
  SDP_CHECK(!parts.empty(), "joined: no parts");
  const size_t esize = dtype_size(parts[0].dtype());
  const char* next = static_cast<const char*>(parts[0].raw());
  int64_t numel = 0;
  for (const Tensor& t : parts) {
    SDP_CHECK(parts[0].device() == Device::meta || t.raw() == next,
              "a head group's q, k and v pieces must be contiguous in their storage group");
    next = static_cast<const char*>(t.raw()) + t.numel() * static_cast<int64_t>(esize);
    numel += t.numel();
  }
  SDP_CHECK(numel == shape.numel(), "joined: ", numel, " elements do not make ", shape.str());
  return Tensor(parts[0].raw(), shape, parts[0].dtype(), parts[0].device());
}

}  // namespace

SwinBlock::SwinBlock(const SwinBlockShape& shape, ParameterSet& params,
                     const WindowConstants& constants, const DropPathKey& key, double drop_path,
                     int index, SwinBlockParams ids)
    : shape_(shape),
      params_(params),
      constants_(constants),
      key_(key),
      drop_path_(drop_path),
      index_(index),
      ids_(std::move(ids)) {
  SDP_CHECK(!ids_.heads.empty() && !ids_.mlp.empty(), "block ", index, " declares no groups");
  SDP_CHECK(ids_.merge.present() == shape_.merge, "block ", index,
            ": patch merging declared where the shape does not merge (or the reverse)");
}

bool SwinBlock::runs() const {
  return ids_.merge.present() || params_.is_materialized(ids_.norm1_weight);
}

std::vector<int> SwinBlock::param_ids() const {
  std::vector<int> ids{ids_.merge.norm_weight, ids_.merge.norm_bias, ids_.merge.reduction,
                       ids_.norm1_weight, ids_.norm1_bias};
  for (const HeadGroupParams& h : ids_.heads) {
    for (int id : h.qkv_weight) ids.push_back(id);
    for (int id : h.qkv_bias) ids.push_back(id);
    ids.push_back(h.table);
    ids.push_back(h.proj);
  }
  for (int id : {ids_.proj_bias, ids_.norm2_weight, ids_.norm2_bias}) ids.push_back(id);
  for (const MlpGroupParams& m : ids_.mlp)
    for (int id : {m.fc1_weight, m.fc1_bias, m.fc2_weight}) ids.push_back(id);
  ids.push_back(ids_.fc2_bias);
  return ids;
}

bool SwinBlock::trains() const {
  for (int id : param_ids())
    if (id >= 0 && params_.is_trained(id)) return true;
  return false;
}

SwinBlock::Context& SwinBlock::context_of(BlockContext& c) const {
  auto* ctx = dynamic_cast<Context*>(&c);
  SDP_CHECK(ctx, "block ", index_, ": the context is not a Swin block's");
  return *ctx;
}

Tensor SwinBlock::qkv_weight(const HeadGroupParams& g) const {
  std::vector<Tensor> parts;
  for (int id : g.qkv_weight) parts.push_back(params_.param(id));
  return joined(parts, {3 * heads_per_group() * shape_.head_dim, shape_.dim});
}

Tensor SwinBlock::qkv_bias(const HeadGroupParams& g) const {
  std::vector<Tensor> parts;
  for (int id : g.qkv_bias) parts.push_back(params_.param(id));
  return joined(parts, {3 * heads_per_group() * shape_.head_dim});
}

std::vector<double> SwinBlock::drop_factors(const DropPathKey& key, int block, int branch,
                                            double rate, int64_t batch) {
  // One stream per (seed, step, block, branch); the sample's global index
  // picks the draw within it. Kept with probability 1 - rate, as timm's
  // DropPath (scaled by 1 / (1 - rate)).
  const uint64_t stream =
      splitmix64(key.seed ^ splitmix64(static_cast<uint64_t>(key.step) * 0x5157494eull ^
                                       splitmix64(static_cast<uint64_t>(2 * block + branch))));
  std::vector<double> f(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const uint64_t sample = static_cast<uint64_t>(key.first_sample + b * key.sample_stride);
    f[static_cast<size_t>(b)] =
        counter_uniform(stream, sample) < 1.0 - rate ? 1.0 / (1.0 - rate) : 0.0;
  }
  return f;
}

OwnedTensor SwinBlock::factors(int branch, int64_t batch, DType dtype, Allocator& alloc) const {
  OwnedTensor out(alloc, {batch}, accum_dtype(dtype), kSaved);  // [B]
  std::vector<double> f = drop_factors(key_, index_, branch, drop_path_, batch);
  if (out->device() == Device::meta) return out;
  // A host view of the draws (0 or 1 / (1 - p): exact in f32 up to rounding
  // of the scale), copied to the device in the factors' dtype.
  if (out->dtype() == DType::f64) {
    ops::transfer(Tensor(f.data(), {batch}, DType::f64, Device::cpu), *out);
  } else {
    std::vector<float> f32(f.begin(), f.end());
    ops::transfer(Tensor(f32.data(), {batch}, DType::f32, Device::cpu), *out);
  }
  return out;
}

TrunkBlock::Forward SwinBlock::forward(const Tensor& x, BlockMode mode, Allocator& alloc) {
  const SwinBlockShape& sh = shape_;
  const int64_t Rin = sh.merge ? 2 * sh.resolution : sh.resolution;
  SDP_CHECK(x.ndim() == 4 && x.size(1) == Rin && x.size(2) == Rin && x.size(3) == sh.in_dim,
            "block ", index_, ": input ", x.describe(), " must be [B, ", Rin, ", ", Rin, ", ",
            sh.in_dim, "]");
  const bool train = mode != BlockMode::eval;
  const ParameterSet& P = params_;
  const DType dt = x.dtype(), st = accum_dtype(dt);
  const int64_t B = x.size(0), R = sh.resolution, C = sh.dim, w = sh.window, N = w * w;
  const int64_t M = B * R * R, Bw = M / N, hg = heads_per_group(), Dh = sh.head_dim;
  const int64_t units = units_per_group();
  Saved s;

  // ---- patch merging (shared): z is the rest of the block's input
  OwnedTensor z_owned;
  if (sh.merge) {
    if (train) s.merge.emplace();
    z_owned = merge_forward(P, ids_.merge, sh.eps, x, train ? &*s.merge : nullptr, alloc);
  }
  const Tensor& z = sh.merge ? *z_owned : x;  // [B, R, R, C]
  if (!P.is_materialized(ids_.norm1_weight)) {
    // B-SDP: the block itself is not held here; only its merging runs.
    SDP_CHECK(sh.merge, "block ", index_, ": a block without its parameters is skipped");
    Forward out;
    out.y = std::move(z_owned);
    if (train) {
      auto ctx = std::make_unique<Context>();
      ctx->saved = std::move(s);
      out.saved = std::move(ctx);
    }
    return out;
  }
  if (train && key_.active && drop_path_ > 0) {
    s.f1 = factors(0, B, dt, alloc);
    s.f2 = factors(1, B, dt, alloc);
  }

  // ---- window attention over the held head groups
  bool any_head = false;
  for (const HeadGroupParams& g : ids_.heads) any_head |= P.is_materialized(g.proj);
  if (any_head) {
    s.mean1 = OwnedTensor(alloc, {B, R, R}, st, kSaved);  // [B, R, R]
    s.rstd1 = OwnedTensor(alloc, {B, R, R}, st, kSaved);
    OwnedTensor h1(alloc, {B, R, R, C}, dt, kScratch);  // [B, R, R, C]
    ops::layernorm_forward(z, P.param(ids_.norm1_weight), P.param(ids_.norm1_bias), sh.eps, *h1,
                           *s.mean1, *s.rstd1);
    s.h1w = OwnedTensor(alloc, {Bw, N, C}, dt, kSaved);  // [Bw, N, C]
    ops::window_partition(*h1, w, sh.shift, *s.h1w);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  const Tensor mask = constants_.mask ? *constants_.mask : Tensor();
  OwnedTensor attn;  // [M, C] window order
  for (int gi = 0; gi < static_cast<int>(ids_.heads.size()); ++gi) {
    const HeadGroupParams& g = ids_.heads[static_cast<size_t>(gi)];
    if (!P.is_materialized(g.proj)) continue;
    HeadSaved hs;
    hs.group = gi;
    hs.qkv = OwnedTensor(alloc, {Bw, N, 3, hg, Dh}, dt, kSaved);  // [Bw, N, 3, hg, Dh]
    Tensor qkv2 = hs.qkv->view({M, 3 * hg * Dh});
    ops::linear_forward(s.h1w->view({M, C}), qkv_weight(g), qkv2);
    ops::bias_add_forward(qkv2, qkv_bias(g));
    hs.out = OwnedTensor(alloc, {Bw, N, hg, Dh}, dt, kSaved);   // [Bw, N, hg, Dh]
    hs.probs = OwnedTensor(alloc, {Bw, hg, N, N}, dt, kSaved);  // [Bw, hg, N, N]
    ops::window_attention_forward(*hs.qkv, P.param(g.table), *constants_.index, mask, scale,
                                  *hs.out, *hs.probs);
    OwnedTensor part(alloc, {M, C}, dt, kScratch);  // [M, C]
    ops::linear_forward(hs.out->view({M, hg * Dh}), P.param(g.proj), *part);
    add_into(attn, std::move(part));
    if (train) s.heads.push_back(std::move(hs));
  }
  if (!attn) {
    attn = OwnedTensor(alloc, {M, C}, dt, kScratch);  // no head held: the bias alone
    ops::fill(*attn, 0.0);
  }
  ops::bias_add_forward(*attn, P.param(ids_.proj_bias));
  OwnedTensor a(alloc, {B, R, R, C}, dt, kScratch);  // [B, R, R, C]
  ops::window_merge(attn->view({Bw, N, C}), w, sh.shift, *a);
  attn = OwnedTensor();
  if (s.f1) ops::scale_per_sample(*a, *s.f1, *a);
  s.x_mid = OwnedTensor(alloc, {B, R, R, C}, dt, kSaved);  // [B, R, R, C]
  ops::add(z, *a, *s.x_mid);
  a = OwnedTensor();

  // ---- MLP over the held unit groups
  bool any_mlp = false;
  for (const MlpGroupParams& g : ids_.mlp) any_mlp |= P.is_materialized(g.fc1_weight);
  if (any_mlp) {
    s.mean2 = OwnedTensor(alloc, {B, R, R}, st, kSaved);
    s.rstd2 = OwnedTensor(alloc, {B, R, R}, st, kSaved);
    s.h2 = OwnedTensor(alloc, {B, R, R, C}, dt, kSaved);  // [B, R, R, C]
    ops::layernorm_forward(*s.x_mid, P.param(ids_.norm2_weight), P.param(ids_.norm2_bias), sh.eps,
                           *s.h2, *s.mean2, *s.rstd2);
  }
  OwnedTensor mlp;  // [M, C]
  for (int gi = 0; gi < static_cast<int>(ids_.mlp.size()); ++gi) {
    const MlpGroupParams& g = ids_.mlp[static_cast<size_t>(gi)];
    if (!P.is_materialized(g.fc1_weight)) continue;
    MlpSaved ms;
    ms.group = gi;
    ms.pre = OwnedTensor(alloc, {M, units}, dt, kSaved);  // [M, units]
    ops::linear_forward(s.h2->view({M, C}), P.param(g.fc1_weight), *ms.pre);
    ops::bias_add_forward(*ms.pre, P.param(g.fc1_bias));
    ms.act = OwnedTensor(alloc, {M, units}, dt, kSaved);  // [M, units]
    ops::gelu_forward(*ms.pre, *ms.act);
    OwnedTensor part(alloc, {M, C}, dt, kScratch);  // [M, C]
    ops::linear_forward(*ms.act, P.param(g.fc2_weight), *part);
    add_into(mlp, std::move(part));
    if (train) s.mlp.push_back(std::move(ms));
  }
  if (!mlp) {
    mlp = OwnedTensor(alloc, {M, C}, dt, kScratch);  // no unit held: the bias alone
    ops::fill(*mlp, 0.0);
  }
  ops::bias_add_forward(*mlp, P.param(ids_.fc2_bias));
  Tensor mlp4 = mlp->view({B, R, R, C});
  if (s.f2) ops::scale_per_sample(mlp4, *s.f2, mlp4);
  OwnedTensor y(alloc, {B, R, R, C}, dt, kSaved);  // [B, R, R, C]
  ops::add(*s.x_mid, mlp4, *y);

  Forward out;
  out.y = std::move(y);
  if (train) {
    if (sh.merge) s.z = std::move(z_owned);
    auto ctx = std::make_unique<Context>();
    ctx->saved = std::move(s);
    out.saved = std::move(ctx);
  }
  return out;
}

OwnedTensor SwinBlock::backward_input(BlockContext& saved, const Tensor& x, const Tensor* y,
                                      OwnedTensor dy, bool keep_for_weights, Allocator& alloc) {
  (void)y;  // the block's backward does not read its output
  Context& ctx = context_of(saved);
  SDP_CHECK(ctx.saved && !ctx.grads, "block ", index_,
            ": backward_input() needs a training forward (once)");
  Saved& s = *ctx.saved;
  const SwinBlockShape& sh = shape_;
  const ParameterSet& P = params_;
  const DType dt = dy->dtype();
  const int64_t B = dy->size(0), R = sh.resolution, C = sh.dim, w = sh.window, N = w * w;
  const int64_t M = B * R * R, Bw = M / N, hg = heads_per_group(), Dh = sh.head_dim;
  const int64_t units = units_per_group();
  const MemCategory keep = keep_for_weights ? kSaved : kScratch;
  OutputGrads g;
  OwnedTensor d_mid;  // [B, R, R, C] gradient of z once the block's body is through

  if (!s.x_mid) {
    d_mid = std::move(dy);  // only the merging ran here
  } else {
    // ---- MLP: y = m + d2 * (fc2(GELU(fc1(h2))) + b2)
    g.d_mlp = OwnedTensor(alloc, {M, C}, dt, keep);  // [M, C]
    Tensor d_mlp4 = g.d_mlp->view({B, R, R, C});
    if (s.f2) {
      ops::scale_per_sample(*dy, *s.f2, d_mlp4);
    } else {
      ops::copy(*dy, d_mlp4);
    }
    for (MlpSaved& ms : s.mlp) {
      const MlpGroupParams& wg = ids_.mlp[static_cast<size_t>(ms.group)];
      const bool mine = keep_for_weights && P.is_trained(wg.fc1_weight);
      OwnedTensor d_act(alloc, {M, units}, dt, kScratch);  // [M, units]
      ops::linear_backward_input(*g.d_mlp, P.param(wg.fc2_weight), *d_act);
      MlpGrads mg;
      mg.dpre = OwnedTensor(alloc, {M, units}, dt, mine ? kSaved : kScratch);  // [M, units]
      ops::gelu_backward_input(*d_act, *ms.pre, *mg.dpre);
      d_act = OwnedTensor();
      ms.pre = OwnedTensor();
      OwnedTensor part(alloc, {M, C}, dt, g.dh2 ? kScratch : keep);  // [M, C]
      ops::linear_backward_input(*mg.dpre, P.param(wg.fc1_weight), *part);
      add_into(g.dh2, std::move(part));
      if (!mine) {
        mg = MlpGrads();
        ms.act = OwnedTensor();
      }
      g.mlp.push_back(std::move(mg));
    }
    d_mid = std::move(dy);  // the residual's share; the MLP's added below
    if (g.dh2) {
      OwnedTensor t(alloc, {B, R, R, C}, dt, kScratch);
      ops::layernorm_backward_input(g.dh2->view({B, R, R, C}), *s.x_mid, P.param(ids_.norm2_weight),
                                    *s.mean2, *s.rstd2, *t);
      ops::accumulate(*d_mid, *t);
    }

    // ---- attention: m = z + d1 * merge(proj(attn(partition(h1))) + bp)
    {
      OwnedTensor da(alloc, {B, R, R, C}, dt, kScratch);  // [B, R, R, C]
      if (s.f1) {
        ops::scale_per_sample(*d_mid, *s.f1, *da);
      } else {
        ops::copy(*d_mid, *da);
      }
      g.d_attn = OwnedTensor(alloc, {M, C}, dt, keep);  // [M, C] window order
      Tensor d_attn3 = g.d_attn->view({Bw, N, C});
      ops::window_partition(*da, w, sh.shift, d_attn3);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
    OwnedTensor dh1w;  // [M, C] window order
    for (HeadSaved& hs : s.heads) {
      const HeadGroupParams& wg = ids_.heads[static_cast<size_t>(hs.group)];
      const bool trained = P.is_trained(wg.proj);
      const bool mine = keep_for_weights && trained;
      OwnedTensor d_out(alloc, {Bw, N, hg, Dh}, dt, kScratch);  // [Bw, N, hg, Dh]
      Tensor d_out2 = d_out->view({M, hg * Dh});
      ops::linear_backward_input(*g.d_attn, P.param(wg.proj), d_out2);
      HeadGrads hgr;
      hgr.dqkv = OwnedTensor(alloc, {Bw, N, 3, hg, Dh}, dt, mine ? kSaved : kScratch);
      Tensor dtable = trained ? P.grad(wg.table) : Tensor();
      ops::window_attention_backward_input(*d_out, *hs.qkv, *hs.probs, *constants_.index, scale,
                                           *hgr.dqkv, trained ? &dtable : nullptr);
      d_out = OwnedTensor();
      hs.probs = OwnedTensor();
      hs.qkv = OwnedTensor();
      OwnedTensor part(alloc, {M, C}, dt, kScratch);  // [M, C]
      ops::linear_backward_input(hgr.dqkv->view({M, 3 * hg * Dh}), qkv_weight(wg), *part);
      add_into(dh1w, std::move(part));
      if (!mine) {
        hgr = HeadGrads();
        hs.out = OwnedTensor();
      }
      g.heads.push_back(std::move(hgr));
    }
    if (dh1w) {
      const Tensor& z = sh.merge ? *s.z : x;
      g.dh1 = OwnedTensor(alloc, {B, R, R, C}, dt, keep);  // [B, R, R, C]
      ops::window_merge(dh1w->view({Bw, N, C}), w, sh.shift, *g.dh1);
      dh1w = OwnedTensor();
      OwnedTensor t(alloc, {B, R, R, C}, dt, kScratch);
      ops::layernorm_backward_input(*g.dh1, z, P.param(ids_.norm1_weight), *s.mean1, *s.rstd1, *t);
      ops::accumulate(*d_mid, *t);
    }
  }

  OwnedTensor dx;  // [B, R', R', in_dim]
  if (sh.merge) {
    const Shape gs = s.merge->g->shape();
    g.dn = OwnedTensor(alloc, gs, dt, keep);  // [B, R, R, 4 Cin]
    dx = merge_backward_input(P, ids_.merge, *s.merge, *d_mid, x.shape(), *g.dn, alloc);
    if (keep_for_weights) g.dz = std::move(d_mid);
  } else {
    dx = std::move(d_mid);
  }
  if (keep_for_weights) {
    ctx.grads = std::move(g);
  } else {
    ctx.saved.reset();
  }
  return dx;
}

void SwinBlock::backward_weight(BlockContext& saved, const Tensor& x, Allocator& alloc) {
  (void)alloc;  // the weight gradients accumulate in place
  Context& ctx = context_of(saved);
  SDP_CHECK(ctx.saved && ctx.grads, "block ", index_,
            ": backward_weight() needs backward_input(keep_for_weights = true) first");
  const ParameterSet& P = params_;
  const Saved& s = *ctx.saved;
  const OutputGrads& g = *ctx.grads;
  const SwinBlockShape& sh = shape_;
  const int64_t C = sh.dim, hg = heads_per_group(), Dh = sh.head_dim;
  auto trained = [&](int id) { return id >= 0 && P.is_trained(id); };

  if (s.x_mid) {
    const int64_t M = s.x_mid->numel() / C;
    for (size_t i = 0; i < s.mlp.size(); ++i) {
      const MlpGroupParams& wg = ids_.mlp[static_cast<size_t>(s.mlp[i].group)];
      if (!trained(wg.fc1_weight)) continue;
      Tensor d2 = P.grad(wg.fc2_weight), d1 = P.grad(wg.fc1_weight), db1 = P.grad(wg.fc1_bias);
      ops::linear_backward_weight(*g.d_mlp, *s.mlp[i].act, d2);
      ops::linear_backward_weight(*g.mlp[i].dpre, s.h2->view({M, C}), d1);
      ops::bias_backward_weight(*g.mlp[i].dpre, db1);
    }
    if (trained(ids_.fc2_bias)) {
      Tensor db = P.grad(ids_.fc2_bias);
      ops::bias_backward_weight(*g.d_mlp, db);
    }
    if (g.dh2 && trained(ids_.norm2_weight)) {
      Tensor dw = P.grad(ids_.norm2_weight), db = P.grad(ids_.norm2_bias);
      ops::layernorm_backward_weight(g.dh2->view(s.x_mid->shape()), *s.x_mid, *s.mean2, *s.rstd2,
                                     dw, db);
    }
    for (size_t i = 0; i < s.heads.size(); ++i) {
      const HeadGroupParams& wg = ids_.heads[static_cast<size_t>(s.heads[i].group)];
      if (!trained(wg.proj)) continue;
      Tensor dproj = P.grad(wg.proj);
      ops::linear_backward_weight(*g.d_attn, s.heads[i].out->view({M, hg * Dh}), dproj);
      std::vector<Tensor> dw_parts, db_parts;
      for (int id : wg.qkv_weight) dw_parts.push_back(P.grad(id));
      for (int id : wg.qkv_bias) db_parts.push_back(P.grad(id));
      Tensor dw = joined(dw_parts, {3 * hg * Dh, C}), db = joined(db_parts, {3 * hg * Dh});
      const Tensor dqkv = g.heads[i].dqkv->view({M, 3 * hg * Dh});
      ops::linear_backward_weight(dqkv, s.h1w->view({M, C}), dw);
      ops::bias_backward_weight(dqkv, db);
    }
    if (trained(ids_.proj_bias)) {
      Tensor db = P.grad(ids_.proj_bias);
      ops::bias_backward_weight(*g.d_attn, db);
    }
    if (g.dh1 && trained(ids_.norm1_weight)) {
      const Tensor& z = sh.merge ? *s.z : x;
      Tensor dw = P.grad(ids_.norm1_weight), db = P.grad(ids_.norm1_bias);
      ops::layernorm_backward_weight(*g.dh1, z, *s.mean1, *s.rstd1, dw, db);
    }
  }
  if (sh.merge) {
    SDP_CHECK(g.dz, "block ", index_, ": the merging's output gradient was not kept");
    merge_backward_weight(P, ids_.merge, *s.merge, *g.dz, *g.dn);
  }
  ctx.grads.reset();
  ctx.saved.reset();
}

}  // namespace sdp::swin
