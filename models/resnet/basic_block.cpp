#include "models/resnet/basic_block.h"

#include <utility>

namespace sdp::resnet {

namespace {
constexpr MemCategory kSaved = MemCategory::activation;

bool trained_id(const ParameterSet& p, int id) { return id >= 0 && p.is_trained(id); }
}  // namespace

// ---- shared layer helpers -----------------------------------------------------

namespace layers {

Shape conv_output_shape(const Shape& x, const Shape& w, const Conv2dGeometry& g) {
  return {x[0], w[0], g.out_size(x[2]), g.out_size(x[3])};
}

namespace {
// The convolution's scratch, for the device the allocator stands for (a
// meta dry run counts the CUDA workspace), freed when the call returns.
OwnedTensor conv_workspace(const Tensor& x, const Tensor& w, const Conv2dGeometry& g,
                           Allocator& alloc) {
  const int64_t n =
      ops::conv2d_workspace_elems(x.shape(), w.shape(), g, x.dtype(), alloc.target_device());
  return OwnedTensor(alloc, {n}, x.dtype(), MemCategory::workspace);  // [n]
}
}  // namespace

void conv_forward(const Tensor& x, const Tensor& w, const Conv2dGeometry& g, Tensor& y,
                  Allocator& alloc, bool accumulate) {
  OwnedTensor ws = conv_workspace(x, w, g, alloc);
  ops::conv2d_forward(x, w, g, y, *ws, accumulate);
}

void conv_backward_input(const Tensor& dy, const Tensor& w, const Conv2dGeometry& g, Tensor& dx,
                         Allocator& alloc, bool accumulate) {
  OwnedTensor ws = conv_workspace(dx, w, g, alloc);
  ops::conv2d_backward_input(dy, w, g, dx, *ws, accumulate);
}

void conv_backward_weight(const Tensor& dy, const Tensor& x, const Conv2dGeometry& g, Tensor& dw,
                          Allocator& alloc) {
  // The workspace follows the activations' dtype (x), not dw's accum dtype.
  const Shape w_shape = dw.shape();
  const int64_t n = ops::conv2d_workspace_elems(x.shape(), w_shape, g, x.dtype(),
                                                alloc.target_device());
  OwnedTensor ws(alloc, {n}, x.dtype(), MemCategory::workspace);  // [n]
  ops::conv2d_backward_weight(dy, x, g, dw, *ws);
}

void batchnorm(BatchNormTensors& bn, const BatchNormSettings& s, const Tensor& x, Tensor& y,
               BlockMode mode, Tensor* mean, Tensor* invstd) {
  if (mode == BlockMode::train) {
    ops::batchnorm_forward_train(x, bn.weight, bn.bias, s.eps, s.momentum, y, *mean, *invstd,
                                 bn.running_mean, bn.running_var);
  } else if (mode == BlockMode::recompute) {
    // The running statistics moved in the first forward already.
    ops::batchnorm_forward_batch_stats(x, bn.weight, bn.bias, s.eps, y, *mean, *invstd);
  } else {
    ops::batchnorm_forward_eval(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, s.eps, y);
  }
}

void batchnorm(const ParameterSet& p, const BatchNormParams& bn, const BatchNormSettings& s,
               const Tensor& x, Tensor& y, BlockMode mode, Tensor* mean, Tensor* invstd) {
  BatchNormTensors t{p.param(bn.weight), p.param(bn.bias), p.param(bn.running_mean),
                     p.param(bn.running_var)};
  batchnorm(t, s, x, y, mode, mean, invstd);
}

}  // namespace layers

// ---- the block ------------------------------------------------------------------

std::vector<int> BasicBlockParams::trainable() const {
  std::vector<int> ids;
  for (const ChannelGroupParams& g : groups)
    for (int id : {g.conv1, g.bn1.weight, g.bn1.bias, g.conv2}) ids.push_back(id);
  for (int id : {bn2.weight, bn2.bias, shortcut_conv, shortcut_bn.weight, shortcut_bn.bias})
    if (id >= 0) ids.push_back(id);
  return ids;
}

BasicBlock::BasicBlock(const BasicBlockShape& shape, const BatchNormSettings& bn,
                       ParameterSet& params, int index, BasicBlockParams ids)
    : shape_(shape), bn_(bn), params_(params), index_(index), ids_(std::move(ids)) {
  SDP_CHECK(!ids_.groups.empty(), "block ", index, " declares no channel groups");
  SDP_CHECK(ids_.shortcut_conv >= 0 ||
                (shape_.stride == 1 && shape_.in_channels == shape_.out_channels),
            "block ", index, " changes its shape without a projection shortcut");
}

bool BasicBlock::branch_active() const {
  for (const ChannelGroupParams& g : ids_.groups)
    if (params_.is_materialized(g.conv1)) return true;
  return false;
}

bool BasicBlock::runs() const { return branch_active() || ids_.shortcut_conv >= 0; }

std::vector<GroupPack> BasicBlock::held_packs() const {
  std::vector<int> first;  // [groups]: each group's conv1 piece
  for (const ChannelGroupParams& g : ids_.groups) first.push_back(g.conv1);
  return held_group_packs(params_, first);
}

std::vector<int> BasicBlock::pack_ids(const GroupPack& pack, int ChannelGroupParams::*layer) const {
  std::vector<int> ids;
  for (int g : pack.groups) ids.push_back(ids_.groups[static_cast<size_t>(g)].*layer);
  return ids;
}

std::vector<int> BasicBlock::pack_ids(const GroupPack& pack, int BatchNormParams::*field) const {
  std::vector<int> ids;
  for (int g : pack.groups) ids.push_back(ids_.groups[static_cast<size_t>(g)].bn1.*field);
  return ids;
}

BasicBlock::Context& BasicBlock::context_of(BlockContext& c) const {
  auto* ctx = dynamic_cast<Context*>(&c);
  SDP_CHECK(ctx, "block ", index_, ": the context is not a basic block's");
  return *ctx;
}

bool BasicBlock::trained() const {
  for (const ChannelGroupParams& g : ids_.groups)
    if (params_.is_trained(g.conv1)) return true;
  return params_.is_trained(ids_.bn2.weight) || trained_id(params_, ids_.shortcut_conv);
}

TrunkBlock::Forward BasicBlock::forward(const Tensor& x, BlockMode mode, Allocator& alloc) {
  const bool train = mode != BlockMode::eval;  // batch statistics, a context
  SDP_CHECK(x.ndim() == 4 && x.size(1) == shape_.in_channels, "block ", index_, ": input ",
            x.describe(), " must be [B, ", shape_.in_channels, ", H, W]");
  const int64_t B = x.size(0), Cout = shape_.out_channels;
  const int64_t Ho = conv1_geometry().out_size(x.size(2)), Wo = conv1_geometry().out_size(x.size(3));
  const DType dt = x.dtype(), st = accum_dtype(dt);
  Saved sv;
  OwnedTensor y(alloc, {B, Cout, Ho, Wo}, dt, kSaved);  // [B, Cout, Ho, Wo]

  const bool branch = branch_active();
  if (branch) {
    sv.o = OwnedTensor(alloc, {B, Cout, Ho, Wo}, dt, kSaved);  // sum of the packs' conv2
    bool first = true;
    for (GroupPack& pack : held_packs()) {
      const PackedTensor w1 = pack_values(params_, pack_ids(pack, &ChannelGroupParams::conv1),
                                          alloc);  // [c, Cin, 3, 3]
      const int64_t c = w1.view.size(0);
      PackSaved ps;
      ps.a = OwnedTensor(alloc, {B, c, Ho, Wo}, dt, kSaved);
      layers::conv_forward(x, *w1, conv1_geometry(), *ps.a, alloc);
      ps.z = OwnedTensor(alloc, {B, c, Ho, Wo}, dt, kSaved);
      if (train) {
        ps.mean = OwnedTensor(alloc, {c}, st, kSaved);
        ps.invstd = OwnedTensor(alloc, {c}, st, kSaved);
      }
      {
        const PackedTensor weight = pack_values(params_, pack_ids(pack, &BatchNormParams::weight),
                                                alloc);  // [c] each
        const PackedTensor bias = pack_values(params_, pack_ids(pack, &BatchNormParams::bias), alloc);
        const std::vector<int> mean_ids = pack_ids(pack, &BatchNormParams::running_mean);
        const std::vector<int> var_ids = pack_ids(pack, &BatchNormParams::running_var);
        const PackedTensor running_mean = pack_values(params_, mean_ids, alloc);
        const PackedTensor running_var = pack_values(params_, var_ids, alloc);
        layers::BatchNormTensors bn1{*weight, *bias, *running_mean, *running_var};
        layers::batchnorm(bn1, bn_, *ps.a, *ps.z, mode, &*ps.mean, &*ps.invstd);
        if (mode == BlockMode::train) {  // the running statistics moved
          unpack_values(params_, mean_ids, running_mean);
          unpack_values(params_, var_ids, running_var);
        }
      }
      ops::relu_forward(*ps.z, *ps.z);
      if (!train) ps.a = OwnedTensor();
      const PackedTensor w2 = pack_values(params_, pack_ids(pack, &ChannelGroupParams::conv2),
                                          alloc);  // [Cout, c, 3, 3]
      layers::conv_forward(*ps.z, *w2, conv2_geometry(), *sv.o, alloc, /*accumulate=*/!first);
      first = false;
      ps.pack = std::move(pack);
      if (train) sv.packs.push_back(std::move(ps));
    }
    if (train) {
      sv.o_mean = OwnedTensor(alloc, {Cout}, st, kSaved);
      sv.o_invstd = OwnedTensor(alloc, {Cout}, st, kSaved);
    }
    layers::batchnorm(params_, ids_.bn2, bn_, *sv.o, *y, mode, &*sv.o_mean, &*sv.o_invstd);
    if (!train) sv.o = OwnedTensor();
  }

  if (ids_.shortcut_conv >= 0) {
    sv.s = OwnedTensor(alloc, {B, Cout, Ho, Wo}, dt, kSaved);
    layers::conv_forward(x, params_.param(ids_.shortcut_conv), shortcut_geometry(), *sv.s, alloc);
    if (train) {
      sv.s_mean = OwnedTensor(alloc, {Cout}, st, kSaved);
      sv.s_invstd = OwnedTensor(alloc, {Cout}, st, kSaved);
    }
    if (branch) {
      OwnedTensor sb(alloc, {B, Cout, Ho, Wo}, dt, MemCategory::workspace);  // bn_s(s)
      layers::batchnorm(params_, ids_.shortcut_bn, bn_, *sv.s, *sb, mode, &*sv.s_mean,
                        &*sv.s_invstd);
      ops::accumulate(*y, *sb);
    } else {
      layers::batchnorm(params_, ids_.shortcut_bn, bn_, *sv.s, *y, mode, &*sv.s_mean,
                        &*sv.s_invstd);
    }
    if (!train) sv.s = OwnedTensor();
  } else {
    SDP_CHECK(branch, "block ", index_, ": an identity block without a branch is skipped by the model");
    ops::accumulate(*y, x);
  }
  ops::relu_forward(*y, *y);
  Forward out;
  out.y = std::move(y);
  if (train) {
    auto ctx = std::make_unique<Context>();
    ctx->saved = std::move(sv);
    out.saved = std::move(ctx);
  }
  return out;
}

OwnedTensor BasicBlock::backward_input(BlockContext& saved, const Tensor& x, const Tensor* y,
                                       OwnedTensor dy, bool keep_for_weights, Allocator& alloc) {
  Context& ctx = context_of(saved);
  SDP_CHECK(ctx.saved && !ctx.kept, "block ", index_,
            ": backward_input() needs a training forward (once)");
  SDP_CHECK(y != nullptr, "block ", index_, ": backward_input() needs the block's output");
  Saved& sv = *ctx.saved;
  const DType dt = dy->dtype();
  const Shape out_shape = dy->shape();  // [B, Cout, Ho, Wo]
  Kept kept;
  const ParameterSet& p = params_;
  auto bn_weight_grads = [&](const BatchNormParams& bn, const Tensor& d, const Tensor& in,
                             const OwnedTensor& mean, const OwnedTensor& invstd) {
    if (!trained_id(p, bn.weight)) return;
    Tensor dw = p.grad(bn.weight), db = p.grad(bn.bias);
    ops::batchnorm_backward_weight(d, in, *mean, *invstd, dw, db);
  };

  // Through the output ReLU, in place: dy becomes the gradient of the sum.
  ops::relu_backward_input(*dy, *y, *dy);
  const bool branch = static_cast<bool>(sv.o);
  if (branch) {
    kept.d_o = OwnedTensor(alloc, out_shape, dt, kSaved);  // [B, Cout, Ho, Wo]
    ops::batchnorm_backward_input(*dy, *sv.o, p.param(ids_.bn2.weight), *sv.o_mean, *sv.o_invstd,
                                  *kept.d_o);
    bn_weight_grads(ids_.bn2, *dy, *sv.o, sv.o_mean, sv.o_invstd);
    sv.o = OwnedTensor();
  }
  OwnedTensor dx;  // [B, Cin, H, W]
  if (ids_.shortcut_conv >= 0) {
    kept.ds = OwnedTensor(alloc, out_shape, dt, kSaved);
    ops::batchnorm_backward_input(*dy, *sv.s, p.param(ids_.shortcut_bn.weight), *sv.s_mean,
                                  *sv.s_invstd, *kept.ds);
    bn_weight_grads(ids_.shortcut_bn, *dy, *sv.s, sv.s_mean, sv.s_invstd);
    sv.s = OwnedTensor();
    dy = OwnedTensor();
    dx = OwnedTensor(alloc, x.shape(), dt, kSaved);
    layers::conv_backward_input(*kept.ds, p.param(ids_.shortcut_conv), shortcut_geometry(), *dx,
                                alloc);
    if (!keep_for_weights || !trained_id(p, ids_.shortcut_conv)) kept.ds = OwnedTensor();
  } else {
    dx = std::move(dy);  // the identity shortcut passes the gradient on
  }

  bool conv2_trained = false;
  for (PackSaved& ps : sv.packs) {
    const Shape inner = ps.a->shape();  // [B, c, Ho, Wo]
    OwnedTensor d(alloc, inner, dt, kSaved);
    {
      const PackedTensor w2 = pack_values(p, pack_ids(ps.pack, &ChannelGroupParams::conv2), alloc);
      layers::conv_backward_input(*kept.d_o, *w2, conv2_geometry(), *d, alloc);
    }
    ops::relu_backward_input(*d, *ps.z, *d);
    if (ps.pack.any_trained()) {  // bn1's weight gradients, cheap: now rather than in backward_weight
      const std::vector<int> w_ids = trained_ids(ps.pack, pack_ids(ps.pack, &BatchNormParams::weight));
      const std::vector<int> b_ids = trained_ids(ps.pack, pack_ids(ps.pack, &BatchNormParams::bias));
      PackedTensor dw = pack_grads(p, w_ids, alloc), db = pack_grads(p, b_ids, alloc);
      ops::batchnorm_backward_weight(*trained_share(ps.pack, *d, 1, alloc),
                                     *trained_share(ps.pack, *ps.a, 1, alloc),
                                     *trained_share(ps.pack, *ps.mean, 0, alloc),
                                     *trained_share(ps.pack, *ps.invstd, 0, alloc), dw.view, db.view);
      add_packed_grads(p, w_ids, dw, alloc);
      add_packed_grads(p, b_ids, db, alloc);
    }
    {
      const PackedTensor weight = pack_values(p, pack_ids(ps.pack, &BatchNormParams::weight), alloc);
      ops::batchnorm_backward_input(*d, *ps.a, *weight, *ps.mean, *ps.invstd, *d);
    }
    ps.a = OwnedTensor();
    {
      const PackedTensor w1 = pack_values(p, pack_ids(ps.pack, &ChannelGroupParams::conv1), alloc);
      layers::conv_backward_input(*d, *w1, conv1_geometry(), *dx, alloc, /*accumulate=*/true);
    }
    const bool keep = keep_for_weights && ps.pack.any_trained();
    conv2_trained |= ps.pack.any_trained();
    kept.da.push_back(keep ? std::move(d) : OwnedTensor());
    if (!keep) ps.z = OwnedTensor();
  }
  if (!keep_for_weights || !conv2_trained) kept.d_o = OwnedTensor();
  if (keep_for_weights) {
    ctx.kept = std::move(kept);
  } else {
    ctx.saved.reset();
  }
  return dx;
}

void BasicBlock::backward_weight(BlockContext& saved, const Tensor& x, Allocator& alloc) {
  Context& ctx = context_of(saved);
  SDP_CHECK(ctx.saved && ctx.kept, "block ", index_, ": backward_weight() without backward_input()");
  Saved& sv = *ctx.saved;
  Kept& k = *ctx.kept;
  for (size_t i = 0; i < sv.packs.size(); ++i) {
    PackSaved& ps = sv.packs[i];
    if (!ps.pack.any_trained()) continue;
    // The trained groups' columns of conv2 and rows of conv1, from their
    // share of the pack's activations.
    const std::vector<int> w2_ids = trained_ids(ps.pack, pack_ids(ps.pack, &ChannelGroupParams::conv2));
    PackedTensor dw2 = pack_grads(params_, w2_ids, alloc);  // [Cout, c, 3, 3]
    layers::conv_backward_weight(*k.d_o, *trained_share(ps.pack, *ps.z, 1, alloc), conv2_geometry(),
                                 dw2.view, alloc);
    add_packed_grads(params_, w2_ids, dw2, alloc);
    dw2 = PackedTensor();
    ps.z = OwnedTensor();
    const std::vector<int> w1_ids = trained_ids(ps.pack, pack_ids(ps.pack, &ChannelGroupParams::conv1));
    PackedTensor dw1 = pack_grads(params_, w1_ids, alloc);  // [c, Cin, 3, 3]
    layers::conv_backward_weight(*trained_share(ps.pack, *k.da[i], 1, alloc), x, conv1_geometry(),
                                 dw1.view, alloc);
    add_packed_grads(params_, w1_ids, dw1, alloc);
    k.da[i] = OwnedTensor();
  }
  if (k.ds) {
    Tensor dws = params_.grad(ids_.shortcut_conv);
    layers::conv_backward_weight(*k.ds, x, shortcut_geometry(), dws, alloc);
  }
  ctx.saved.reset();
  ctx.kept.reset();
}

}  // namespace sdp::resnet
