#include "models/swin/swin_model.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/ops.h"
#include "models/common/component_groups.h"
#include "models/common/stage_checks.h"
#include "models/common/tensor_staging.h"

namespace sdp::swin {

namespace {
constexpr MemCategory kSaved = MemCategory::activation;
constexpr MemCategory kScratch = MemCategory::workspace;
constexpr double kInitStd = 0.02;  // timm's trunc_normal_(std=.02) of linears and bias tables

struct BlockSite {
  std::string prefix;        // "layers.1.blocks.0."
  std::string stage_prefix;  // "layers.1."
  SwinBlockShape shape;
  int stage = 0;
};

std::vector<BlockSite> block_sites(const SwinConfig& c) {
  std::vector<BlockSite> out;
  for (int s = 0; s < c.stage_count(); ++s) {
    for (int64_t j = 0; j < c.depths[static_cast<size_t>(s)]; ++j) {
      BlockSite site;
      site.stage = s;
      site.stage_prefix = "layers." + std::to_string(s) + ".";
      site.prefix = site.stage_prefix + "blocks." + std::to_string(j) + ".";
      SwinBlockShape& sh = site.shape;
      sh.dim = c.stage_dim(s);
      sh.merge = s > 0 && j == 0;
      sh.in_dim = sh.merge ? sh.dim / 2 : sh.dim;
      sh.resolution = c.stage_resolution(s);
      sh.window = c.stage_window(s);
      sh.shift = c.block_shift(s, j);
      sh.heads = c.num_heads[static_cast<size_t>(s)];
      sh.head_dim = c.head_dim(s);
      sh.hidden = c.mlp_hidden(s);
      sh.eps = c.ln_eps;
      out.push_back(site);
    }
  }
  return out;
}

// The relative position index of a w x w window, as timm builds it:
// index[i N + j] = (ri - rj + w - 1) (2 w - 1) + (ci - cj + w - 1).
std::vector<int32_t> relative_position_index(int64_t w) {
  const int64_t N = w * w;
  std::vector<int32_t> idx(static_cast<size_t>(N * N));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j)
      idx[static_cast<size_t>(i * N + j)] =
          static_cast<int32_t>((i / w - j / w + w - 1) * (2 * w - 1) + (i % w - j % w + w - 1));
  return idx;
}

// The shifted windows' mask [nW, N, N] (timm's): tokens of one window that
// came from different regions of the rolled image (three bands per axis:
// [0, R - w), [R - w, R - shift), [R - shift, R)) get -100.
std::vector<double> shift_mask(int64_t R, int64_t w, int64_t shift) {
  const int64_t n = R / w, N = w * w;
  auto band = [&](int64_t p) { return p < R - w ? 0 : p < R - shift ? 1 : 2; };
  std::vector<double> mask(static_cast<size_t>(n * n * N * N));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t a = 0; a < N; ++a)
        for (int64_t b = 0; b < N; ++b) {
          const int64_t la = 3 * band(i * w + a / w) + band(j * w + a % w);
          const int64_t lb = 3 * band(i * w + b / w) + band(j * w + b % w);
          mask[static_cast<size_t>(((i * n + j) * N + a) * N + b)] = la == lb ? 0.0 : -100.0;
        }
  return mask;
}
}  // namespace

std::vector<Component> SwinModel::component_specs(const SwinConfig& config,
                                                  const ModelLayout& layout) {
  config.validate();
  const auto sites = block_sites(config);
  const int L = static_cast<int>(sites.size());
  const bool neuron = layout.granularity == Granularity::neuron;
  // Split shared components: the patch embedding, each merging block (at
  // neuron granularity every block, for its norms and output biases), final
  // norm and head.
  std::vector<Component> out = shared_and_block_components(L, layout, [&](int b) {
    return neuron || sites[static_cast<size_t>(b)].shape.merge;
  });
  if (!neuron) return out;
  for (int s = 0; s < config.stage_count(); ++s) {
    if (layout.head_groups < 1 ||
        config.num_heads[static_cast<size_t>(s)] % layout.head_groups != 0)
      fail("head_groups = ", layout.head_groups, " must divide every stage's heads; stage ", s,
           " of model ", config.name, " has ", config.num_heads[static_cast<size_t>(s)]);
    if (layout.ffn_groups < 1 || config.mlp_hidden(s) % layout.ffn_groups != 0)
      fail("ffn_groups = ", layout.ffn_groups, " must divide every stage's MLP units; stage ", s,
           " of model ", config.name, " has ", config.mlp_hidden(s));
  }
  // Group-major, as for LLaMA: a cyclic plan's contiguous windows then give
  // every rank the same share of every block.
  for (int g = 0; g < std::max(layout.ffn_groups, layout.head_groups); ++g)
    for (int b = 0; b < L; ++b) {
      const std::string block = "block." + std::to_string(b);
      if (g < layout.ffn_groups)
        out.push_back({block + ".ffn." + std::to_string(g),
                       ComponentKind::ffn_group,
                       b,
                       g,
                       {},
                       0,
                       -1,
                       1 + b});
      if (g < layout.head_groups)
        out.push_back({block + ".heads." + std::to_string(g),
                       ComponentKind::head_group,
                       b,
                       g,
                       {},
                       0,
                       -1,
                       1 + b});
    }
  return out;
}

SwinModel::SwinModel(const SwinConfig& config, ModelLayout layout)
    : BlockModel(std::move(layout)), config_(config) {
  build_components(component_specs(config_, layout_), [this] { declare_parameters(); });
}

void SwinModel::declare_parameters() {
  const SwinConfig& c = config_;
  const auto sites = block_sites(c);
  const bool neuron = layout_.granularity == Granularity::neuron;
  const int HG = neuron ? layout_.head_groups : 1, FG = neuron ? layout_.ffn_groups : 1;
  std::vector<SwinBlockParams> blocks(sites.size());
  for (SwinBlockParams& b : blocks) {
    b.heads.resize(static_cast<size_t>(HG));
    b.mlp.resize(static_cast<size_t>(FG));
  }
  const int64_t D = c.embed_dim, K = c.num_classes, p = c.patch_size;
  const int64_t last = c.stage_dim(c.stage_count() - 1);

  for (Component& comp : components_) {
    const int g = comp.group;
    auto add = [&](int id) {
      comp.params.push_back(id);
      return id;
    };
    auto normal = [&](const std::string& n, Shape s, double std = kInitStd) {
      return add(params_.declare(n, std::move(s), g, InitKind::normal, std));
    };
    auto ones = [&](const std::string& n, int64_t d) {
      return add(params_.declare(n, {d}, g, InitKind::ones));
    };
    auto zeros = [&](const std::string& n, int64_t d) {
      return add(params_.declare(n, {d}, g, InitKind::zeros));
    };
    // Per-block parameters every neuron group of the block reads or writes.
    auto declare_block_shared = [&](size_t b) {
      const BlockSite& s = sites[b];
      SwinBlockParams& bp = blocks[b];
      const int64_t C = s.shape.dim;
      bp.norm1_weight = ones(s.prefix + "norm1.weight", C);
      bp.norm1_bias = zeros(s.prefix + "norm1.bias", C);
      bp.proj_bias = zeros(s.prefix + "attn.proj.bias", C);
      bp.norm2_weight = ones(s.prefix + "norm2.weight", C);
      bp.norm2_bias = zeros(s.prefix + "norm2.bias", C);
      bp.fc2_bias = zeros(s.prefix + "mlp.fc2.bias", C);
      // The output biases are added on every rank (alone where no group is
      // held); the norms run only in front of held groups.
      const int block = static_cast<int>(b);
      for (int id : {bp.norm1_weight, bp.norm1_bias})
        sublayer_params_.push_back({id, block, ComponentKind::head_group});
      for (int id : {bp.norm2_weight, bp.norm2_bias})
        sublayer_params_.push_back({id, block, ComponentKind::ffn_group});
    };
    switch (comp.kind) {
      case ComponentKind::shared: {
        auto serves = [&](int site) { return comp.site < 0 || comp.site == site; };
        const int output_site = static_cast<int>(sites.size()) + 1;
        if (serves(0)) {
          // PyTorch's default convolution init has variance 1 / (3 fan_in);
          // a normal of that variance.
          const int64_t fan_in = c.in_chans * p * p;
          embed_weight_ = normal("patch_embed.proj.weight", {D, c.in_chans, p, p},
                                 1.0 / std::sqrt(3.0 * static_cast<double>(fan_in)));
          embed_bias_ = zeros("patch_embed.proj.bias", D);
          embed_norm_weight_ = ones("patch_embed.norm.weight", D);
          embed_norm_bias_ = zeros("patch_embed.norm.bias", D);
        }
        for (size_t b = 0; b < sites.size(); ++b) {
          const BlockSite& s = sites[b];
          if (!serves(1 + static_cast<int>(b))) continue;
          if (s.shape.merge) {
            MergeParams& m = blocks[b].merge;
            const int64_t in4 = 4 * s.shape.in_dim;
            m.norm_weight = ones(s.stage_prefix + "downsample.norm.weight", in4);
            m.norm_bias = zeros(s.stage_prefix + "downsample.norm.bias", in4);
            m.reduction =
                normal(s.stage_prefix + "downsample.reduction.weight", {s.shape.dim, in4});
          }
          if (neuron) declare_block_shared(b);
        }
        if (serves(output_site)) {
          norm_weight_ = ones("norm.weight", last);
          norm_bias_ = zeros("norm.bias", last);
          head_weight_ = normal("head.fc.weight", {K, last});
          head_bias_ = zeros("head.fc.bias", K);
        }
        break;
      }
      case ComponentKind::block: {
        const BlockSite& s = sites[static_cast<size_t>(comp.block)];
        SwinBlockParams& bp = blocks[static_cast<size_t>(comp.block)];
        const int64_t C = s.shape.dim, F = s.shape.hidden, H = s.shape.heads;
        const int64_t rows = (2 * s.shape.window - 1) * (2 * s.shape.window - 1);
        HeadGroupParams& h = bp.heads[0];
        MlpGroupParams& m = bp.mlp[0];
        // timm's order within the block.
        bp.norm1_weight = ones(s.prefix + "norm1.weight", C);
        bp.norm1_bias = zeros(s.prefix + "norm1.bias", C);
        h.table = normal(s.prefix + "attn.relative_position_bias_table", {rows, H});
        h.qkv_weight = {normal(s.prefix + "attn.qkv.weight", {3 * C, C})};
        h.qkv_bias = {zeros(s.prefix + "attn.qkv.bias", 3 * C)};
        h.proj = normal(s.prefix + "attn.proj.weight", {C, C});
        bp.proj_bias = zeros(s.prefix + "attn.proj.bias", C);
        bp.norm2_weight = ones(s.prefix + "norm2.weight", C);
        bp.norm2_bias = zeros(s.prefix + "norm2.bias", C);
        m.fc1_weight = normal(s.prefix + "mlp.fc1.weight", {F, C});
        m.fc1_bias = zeros(s.prefix + "mlp.fc1.bias", F);
        m.fc2_weight = normal(s.prefix + "mlp.fc2.weight", {C, F});
        bp.fc2_bias = zeros(s.prefix + "mlp.fc2.bias", C);
        break;
      }
      case ComponentKind::head_group: {
        const BlockSite& s = sites[static_cast<size_t>(comp.block)];
        const int64_t C = s.shape.dim, H = s.shape.heads, Dh = s.shape.head_dim;
        const int64_t rows = (2 * s.shape.window - 1) * (2 * s.shape.window - 1);
        const int64_t hg = H / HG, width = hg * Dh, start = comp.index * width;
        const std::string label = "heads." + std::to_string(comp.index);
        HeadGroupParams& h =
            blocks[static_cast<size_t>(comp.block)].heads[static_cast<size_t>(comp.index)];
        const char* parts[] = {"q", "k", "v"};
        // q, k, v pieces one after another: contiguous in the group's storage.
        for (int part = 0; part < 3; ++part)
          h.qkv_weight.push_back(add(params_.declare_piece(
              s.prefix + "attn.qkv.weight", {3 * C, C}, 0, part * C + start, width,
              label + "." + parts[part], g, InitKind::normal, kInitStd)));
        for (int part = 0; part < 3; ++part)
          h.qkv_bias.push_back(
              add(params_.declare_piece(s.prefix + "attn.qkv.bias", {3 * C}, 0, part * C + start,
                                        width, label + "." + parts[part], g, InitKind::zeros)));
        h.table =
            add(params_.declare_piece(s.prefix + "attn.relative_position_bias_table", {rows, H}, 1,
                                      comp.index * hg, hg, label, g, InitKind::normal, kInitStd));
        h.proj = add(params_.declare_piece(s.prefix + "attn.proj.weight", {C, C}, 1, start, width,
                                           label, g, InitKind::normal, kInitStd));
        break;
      }
      case ComponentKind::ffn_group: {
        const BlockSite& s = sites[static_cast<size_t>(comp.block)];
        const int64_t C = s.shape.dim, F = s.shape.hidden;
        const int64_t units = F / FG, start = comp.index * units;
        const std::string label = "ffn." + std::to_string(comp.index);
        MlpGroupParams& m =
            blocks[static_cast<size_t>(comp.block)].mlp[static_cast<size_t>(comp.index)];
        m.fc1_weight = add(params_.declare_piece(s.prefix + "mlp.fc1.weight", {F, C}, 0, start,
                                                 units, label, g, InitKind::normal, kInitStd));
        m.fc1_bias = add(params_.declare_piece(s.prefix + "mlp.fc1.bias", {F}, 0, start, units,
                                               label, g, InitKind::zeros));
        m.fc2_weight = add(params_.declare_piece(s.prefix + "mlp.fc2.weight", {C, F}, 1, start,
                                                 units, label, g, InitKind::normal, kInitStd));
        break;
      }
      default:
        fail("component ", comp.name, " of kind ", component_kind_name(comp.kind),
             " does not belong to a Swin Transformer");
    }
  }
  // timm leaves the relative position bias tables out of weight decay.
  for (int id = 0; id < params_.count(); ++id)
    if (params_.decl(id).full_name.find("relative_position_bias_table") != std::string::npos)
      params_.exempt_from_weight_decay(id);

  std::vector<TrunkBlock*> trunk_blocks;
  for (size_t b = 0; b < sites.size(); ++b) {
    shapes_.push_back(sites[b].shape);
    constants_.push_back(std::make_unique<WindowConstants>());
    blocks_.push_back(std::make_unique<SwinBlock>(
        sites[b].shape, params_, *constants_.back(), current_key_,
        c.block_drop_path(static_cast<int64_t>(b)), static_cast<int>(b), std::move(blocks[b])));
    trunk_blocks.push_back(blocks_.back().get());
  }
  set_blocks(std::move(trunk_blocks));
}

void SwinModel::set_drop_path(double rate) {
  if (!(rate >= 0 && rate < 1))
    fail("drop_path = ", rate, " must be in [0, 1) for model ", config_.name);
  config_.drop_path_rate = rate;
  for (size_t b = 0; b < blocks_.size(); ++b)
    blocks_[b]->set_drop_path(config_.block_drop_path(static_cast<int64_t>(b)));
}

void SwinModel::materialize_constants() {
  // Constants of the model, not parameters (timm's non-persistent buffers).
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const SwinBlockShape& s = shapes_[b];
    WindowConstants& k = *constants_[b];
    const int64_t N = s.tokens_per_window(),
                  nW = (s.resolution / s.window) * (s.resolution / s.window);
    std::vector<int32_t> idx = relative_position_index(s.window);
    k.index = OwnedTensor(*alloc_, {N * N}, DType::i32, kScratch);  // [N N]
    ops::transfer(Tensor(idx.data(), {N * N}, DType::i32, Device::cpu), *k.index);
    k.mask = OwnedTensor();
    if (s.shift > 0) {
      std::vector<double> mask = shift_mask(s.resolution, s.window, s.shift);
      k.mask = OwnedTensor(*alloc_, {nW, N, N}, dtype_, kScratch);  // [nW, N, N]
      stage_copy(Tensor(mask.data(), {nW, N, N}, DType::f64, Device::cpu), *k.mask);
    }
  }
}

std::vector<int> SwinModel::input_site_params() const {
  return {embed_weight_, embed_bias_, embed_norm_weight_, embed_norm_bias_};
}

std::vector<int> SwinModel::output_site_params() const {
  return {norm_weight_, norm_bias_, head_weight_, head_bias_};
}

namespace {
// What the patch embedding keeps for its weight gradients.
struct EmbedSaved : StageContext {
  OwnedTensor patches;     // [B, R0, R0, C p p]
  OwnedTensor e;           // [B, R0, R0, D] before the norm
  OwnedTensor mean, rstd;  // [B, R0, R0]
};
// What the final norm, pooling and head keep (the logits are the HeadContext's).
struct NormPoolSaved : StageContext {
  OwnedTensor mean, rstd;  // [B, R, R] final norm statistics
  OwnedTensor normed;      // [B, R, R, C]
  OwnedTensor pooled;      // [B, C]
};
}  // namespace

OwnedTensor SwinModel::input_forward(const Tensor& images, bool train,
                                     std::unique_ptr<StageContext>& saved) {
  Allocator& alloc = *alloc_;
  const int64_t B = images.size(0), p = config_.patch_size, R = config_.img_size / p;
  const int64_t D = config_.embed_dim, cpp = config_.in_chans * p * p;
  const DType st = accum_dtype(dtype_);
  const MemCategory cat = train ? kSaved : kScratch;
  hooks_.call_needed(0, ParamPass::forward);
  OwnedTensor patches(alloc, {B, R, R, cpp}, dtype_, cat);  // [B, R, R, C p p]
  ops::patchify(images, p, *patches);
  OwnedTensor e(alloc, {B, R, R, D}, dtype_, cat);  // [B, R, R, D]
  Tensor e2 = e->view({B * R * R, D});
  ops::linear_forward(patches->view({B * R * R, cpp}), params_.param(embed_weight_).view({D, cpp}),
                      e2);
  ops::bias_add_forward(e2, params_.param(embed_bias_));
  OwnedTensor mean(alloc, {B, R, R}, st, cat), rstd(alloc, {B, R, R}, st, cat);  // [B, R, R]
  OwnedTensor h(alloc, {B, R, R, D}, dtype_, kSaved);  // [B, R, R, D]: stream entry 0
  ops::layernorm_forward(*e, params_.param(embed_norm_weight_), params_.param(embed_norm_bias_),
                         config_.ln_eps, *h, *mean, *rstd);
  hooks_.call_done(0, ParamPass::forward);
  if (train) {
    auto es = std::make_unique<EmbedSaved>();
    es->patches = std::move(patches);
    es->e = std::move(e);
    es->mean = std::move(mean);
    es->rstd = std::move(rstd);
    saved = std::move(es);
  }
  return h;
}

void SwinModel::output_forward(const Tensor& trunk_output, bool train, HeadContext& head) {
  Allocator& alloc = *alloc_;
  const Tensor& last = trunk_output;  // [B, R, R, C]
  const int64_t B = last.size(0), R = last.size(1), C = last.size(3), K = config_.num_classes;
  const DType st = accum_dtype(dtype_);
  const MemCategory cat = train ? kSaved : kScratch;
  auto h = std::make_unique<NormPoolSaved>();
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::forward);
  h->mean = OwnedTensor(alloc, {B, R, R}, st, cat);
  h->rstd = OwnedTensor(alloc, {B, R, R}, st, cat);
  h->normed = OwnedTensor(alloc, {B, R, R, C}, dtype_, cat);  // [B, R, R, C]
  ops::layernorm_forward(last, params_.param(norm_weight_), params_.param(norm_bias_),
                         config_.ln_eps, *h->normed, *h->mean, *h->rstd);
  h->pooled = OwnedTensor(alloc, {B, C}, dtype_, cat);  // [B, C]
  ops::token_mean_forward(*h->normed, *h->pooled);
  head.logits = OwnedTensor(alloc, {B, K}, dtype_, cat);  // [B, K]
  ops::linear_forward(*h->pooled, params_.param(head_weight_), *head.logits);
  ops::bias_add_forward(*head.logits, params_.param(head_bias_));
  hooks_.call_done(head_site, ParamPass::forward);
  head.saved = std::move(h);
}

void SwinModel::trim_head(HeadContext& head) {
  static_cast<NormPoolSaved&>(*head.saved).normed = OwnedTensor();
}

Shape SwinModel::block_input_shape(const Tensor& images, int block) const {
  if (images.ndim() != 4)
    fail("stage_input_shape: images must be [batch, channels, height, width], got ",
         images.describe());
  const SwinBlockShape& s = shapes_[static_cast<size_t>(block)];
  const int64_t R = s.merge ? 2 * s.resolution : s.resolution;  // before the block's merging
  return {images.size(0), R, R, s.in_dim};
}

DropPathKey SwinModel::key_for(int micro_batch, bool train) const {
  DropPathKey k;
  if (!train || !sample_key_ || config_.drop_path_rate <= 0) return k;
  k.active = true;
  k.seed = sample_key_->seed;
  k.step = sample_key_->step;
  k.first_sample = sample_key_->first_sample + micro_batch * sample_key_->micro_batch_stride;
  k.sample_stride = sample_key_->sample_stride;
  return k;
}

void SwinModel::enter_trunk(int micro_batch, bool train, bool backward) {
  if (backward) {
    auto it = keys_.find(micro_batch);
    current_key_ = it != keys_.end() ? it->second : DropPathKey();
    return;
  }
  current_key_ = key_for(micro_batch, train);
  if (train) keys_[micro_batch] = current_key_;
}

Shape SwinModel::check_inputs(const Tensor& images) const {
  const int64_t S = config_.img_size;
  if (images.ndim() != 4 || images.size(1) != config_.in_chans || images.size(2) != S ||
      images.size(3) != S)
    fail("forward: model ", config_.name, " needs images [batch, ", config_.in_chans, ", ", S,
         ", ", S, "], got ", images.describe());
  expect_dtype(images, dtype_, "forward", "images");
  return {images.size(0)};
}

Shape SwinModel::check_received(const Tensor& received) const {
  const SwinBlockShape& s = shapes_[static_cast<size_t>(stage_.first_block)];
  const int64_t R = s.merge ? 2 * s.resolution : s.resolution;  // before the block's merging
  if (received.ndim() != 4 || received.size(1) != R || received.size(2) != R ||
      received.size(3) != s.in_dim)
    fail("forward_stage: the received activation must be [batch, ", R, ", ", R, ", ", s.in_dim,
         "], got ", received.describe());
  return {received.size(0)};
}

OwnedTensor SwinModel::output_backward(HeadContext& head, const Tensor& trunk_output,
                                       const GradsReady& ready) {
  Allocator& alloc = *alloc_;
  const NormPoolSaved& h = static_cast<const NormPoolSaved&>(*head.saved);
  const Tensor& out = trunk_output;  // [B, R, R, C]
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::backward);
  OwnedTensor dpooled(alloc, h.pooled->shape(), dtype_, kScratch);  // [B, C]
  ops::linear_backward_input(*head.logits, params_.param(head_weight_), *dpooled);
  OwnedTensor dnormed(alloc, out.shape(), dtype_, kScratch);  // [B, R, R, C]
  ops::token_mean_backward_input(*dpooled, *dnormed);
  OwnedTensor dh(alloc, out.shape(), dtype_, kSaved);  // [B, R, R, C]
  ops::layernorm_backward_input(*dnormed, out, params_.param(norm_weight_), *h.mean, *h.rstd, *dh);
  hooks_.call_done(head_site, ParamPass::backward);
  if (params_.is_trained(head_weight_)) {
    Tensor dw = params_.grad(head_weight_), db = params_.grad(head_bias_);
    ops::linear_backward_weight(*head.logits, *h.pooled, dw);
    ops::bias_backward_weight(*head.logits, db);
  }
  if (params_.is_trained(norm_weight_)) {
    Tensor dnw = params_.grad(norm_weight_), dnb = params_.grad(norm_bias_);
    ops::layernorm_backward_weight(*dnormed, out, *h.mean, *h.rstd, dnw, dnb);
  }
  params_.report_trained({norm_weight_, norm_bias_, head_weight_, head_bias_}, ready);
  head.release();
  return dh;
}

void SwinModel::input_backward(std::unique_ptr<StageContext>& saved, OwnedTensor dh,
                               TrunkContext& trunk, const GradsReady& ready) {
  (void)trunk;
  // The patch embedding: no gradient for the images, only its weights'.
  Allocator& alloc = *alloc_;
  EmbedSaved& es = static_cast<EmbedSaved&>(*saved);
  const int64_t B = es.e->size(0), R = es.e->size(1), D = es.e->size(3);
  const int64_t cpp = es.patches->size(3);
  if (params_.is_trained(embed_norm_weight_)) {
    Tensor dw = params_.grad(embed_norm_weight_), db = params_.grad(embed_norm_bias_);
    ops::layernorm_backward_weight(*dh, *es.e, *es.mean, *es.rstd, dw, db);
  }
  if (params_.is_trained(embed_weight_)) {
    hooks_.call_needed(0, ParamPass::backward);
    OwnedTensor de(alloc, es.e->shape(), dtype_, kScratch);  // [B, R, R, D]
    ops::layernorm_backward_input(*dh, *es.e, params_.param(embed_norm_weight_), *es.mean,
                                  *es.rstd, *de);
    hooks_.call_done(0, ParamPass::backward);
    Tensor dw = params_.grad(embed_weight_).view({D, cpp}), db = params_.grad(embed_bias_);
    const Tensor de2 = de->view({B * R * R, D});
    ops::linear_backward_weight(de2, es.patches->view({B * R * R, cpp}), dw);
    ops::bias_backward_weight(de2, db);
  }
  params_.report_trained({embed_weight_, embed_bias_, embed_norm_weight_, embed_norm_bias_},
                         ready);
  saved.reset();
  dh = OwnedTensor();
}

void SwinModel::logits(const Tensor& images, Tensor& out) {
  SDP_CHECK(alloc_, "materialize() the model before logits()");
  check_whole("logits()");
  const int64_t B = images.size(0), K = config_.num_classes;
  expect_shape(out, {B, K}, "logits", "out");
  TrunkContext trunk;
  const Tensor& last = evaluate_trunk(images, trunk);
  HeadContext head;
  output_forward(last, /*train=*/false, head);
  ops::copy(*head.logits, out);
}

}  // namespace sdp::swin
