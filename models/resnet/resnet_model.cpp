#include "models/resnet/resnet_model.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/ops.h"
#include "models/common/component_groups.h"
#include "models/common/stage_checks.h"

namespace sdp::resnet {

namespace {
constexpr MemCategory kSaved = MemCategory::activation;

struct BlockSite {
  std::string prefix;  // "layer2.0."
  BasicBlockShape shape;
};

// Every basic block in model order, with its torchvision name and shape.
std::vector<BlockSite> block_sites(const ResNetConfig& c) {
  std::vector<BlockSite> out;
  int64_t in = c.widths[0];
  for (int s = 0; s < 4; ++s) {
    const int64_t w = c.widths[static_cast<size_t>(s)];
    for (int64_t i = 0; i < c.blocks[static_cast<size_t>(s)]; ++i) {
      BlockSite site;
      site.prefix = "layer" + std::to_string(s + 1) + "." + std::to_string(i) + ".";
      site.shape = {in, w, i == 0 ? c.stage_stride(s) : 1};
      out.push_back(site);
      in = w;
    }
  }
  return out;
}

bool needs_projection(const BasicBlockShape& s) {
  return s.stride != 1 || s.in_channels != s.out_channels;
}

// Kaiming normal with fan_out (He et al.; torchvision's ResNet init).
double conv_std(int64_t out_channels, int64_t kernel) {
  return std::sqrt(2.0 / static_cast<double>(out_channels * kernel * kernel));
}
}  // namespace

std::vector<Component> ResNetModel::component_specs(const ResNetConfig& config,
                                                    const ModelLayout& layout) {
  config.validate();
  const auto sites = block_sites(config);
  const int L = static_cast<int>(sites.size());
  const bool neuron = layout.granularity == Granularity::neuron;
  // Split shared components: the stem, each block with a downsampling
  // shortcut (at neuron granularity every block, for its bn2), the classifier.
  std::vector<Component> out = shared_and_block_components(L, layout, [&](int b) {
    return neuron || needs_projection(sites[static_cast<size_t>(b)].shape);
  });
  if (!neuron) return out;
  const int G = layout.channel_groups;
  for (const BlockSite& s : sites)
    if (G < 1 || s.shape.out_channels % G != 0)
      fail("channel_groups = ", G, " must divide every basic block's width; block ",
           s.prefix.substr(0, s.prefix.size() - 1), " of model ", config.name, " has ",
           s.shape.out_channels, " channels");
  // Group-major, as for LLaMA: a cyclic plan's contiguous windows then give
  // every rank the same share of every block.
  for (int g = 0; g < G; ++g)
    for (int b = 0; b < L; ++b)
      out.push_back({"block." + std::to_string(b) + ".channels." + std::to_string(g),
                     ComponentKind::channel_group, b, g, {}, 0, -1, 1 + b});
  return out;
}

ResNetModel::ResNetModel(const ResNetConfig& config, ModelLayout layout)
    : BlockModel(std::move(layout)), config_(config), bn_{config.bn_eps, config.bn_momentum} {
  build_components(component_specs(config_, layout_), [this] { declare_parameters(); });
}

BatchNormParams ResNetModel::declare_bn(const std::string& prefix, int64_t channels, int group) {
  BatchNormParams bn;
  bn.weight = params_.declare(prefix + "weight", {channels}, group, InitKind::ones);
  bn.bias = params_.declare(prefix + "bias", {channels}, group, InitKind::zeros);
  bn.running_mean = params_.declare_buffer(prefix + "running_mean", {channels}, group, InitKind::zeros);
  bn.running_var = params_.declare_buffer(prefix + "running_var", {channels}, group, InitKind::ones);
  return bn;
}

void ResNetModel::declare_parameters() {
  const ResNetConfig& c = config_;
  const auto sites = block_sites(c);
  const bool neuron = layout_.granularity == Granularity::neuron;
  const int G = neuron ? layout_.channel_groups : 1;
  std::vector<BasicBlockParams> blocks(sites.size());
  for (BasicBlockParams& b : blocks) b.groups.resize(static_cast<size_t>(G));
  const int64_t last = c.widths[3];

  for (Component& comp : components_) {
    const int g = comp.group;
    auto collect = [&](std::initializer_list<int> ids) {
      for (int id : ids) comp.params.push_back(id);
    };
    auto collect_bn = [&](const BatchNormParams& bn) {
      collect({bn.weight, bn.bias, bn.running_mean, bn.running_var});
    };
    switch (comp.kind) {
      case ComponentKind::shared: {
        // The unsplit shared component (site -1) holds what every site
        // reads; a split one (ModelLayout::split_shared) its own site's.
        auto serves = [&](int site) { return comp.site < 0 || comp.site == site; };
        const int output_site = static_cast<int>(sites.size()) + 1;
        if (serves(0)) {
          stem_conv_ = params_.declare("conv1.weight", {c.widths[0], c.in_channels, 3, 3}, g,
                                       InitKind::normal, conv_std(c.widths[0], 3));
          collect({stem_conv_});
          stem_bn_ = declare_bn("bn1.", c.widths[0], g);
          collect_bn(stem_bn_);
        }
        for (size_t b = 0; b < sites.size(); ++b) {
          const BlockSite& s = sites[b];
          if (!needs_projection(s.shape) || !serves(1 + static_cast<int>(b))) continue;
          const int64_t out = s.shape.out_channels;
          blocks[b].shortcut_conv =
              params_.declare(s.prefix + "downsample.0.weight", {out, s.shape.in_channels, 1, 1},
                              g, InitKind::normal, conv_std(out, 1));
          collect({blocks[b].shortcut_conv});
          blocks[b].shortcut_bn = declare_bn(s.prefix + "downsample.1.", out, g);
          collect_bn(blocks[b].shortcut_bn);
        }
        // PyTorch's Linear draws U(-1/sqrt(in), 1/sqrt(in)); a normal of the
        // same variance.
        if (serves(output_site)) {
          fc_weight_ = params_.declare("fc.weight", {c.num_classes, last}, g, InitKind::normal,
                                       1.0 / std::sqrt(3.0 * static_cast<double>(last)));
          fc_bias_ = params_.declare("fc.bias", {c.num_classes}, g, InitKind::zeros);
          collect({fc_weight_, fc_bias_});
        }
        if (!neuron) break;
        // bn2 normalizes the sum of every channel group's contribution.
        for (size_t b = 0; b < sites.size(); ++b) {
          if (!serves(1 + static_cast<int>(b))) continue;
          blocks[b].bn2 = declare_bn(sites[b].prefix + "bn2.", sites[b].shape.out_channels, g);
          collect_bn(blocks[b].bn2);
          for (int id : {blocks[b].bn2.weight, blocks[b].bn2.bias})
            sublayer_params_.push_back({id, static_cast<int>(b), ComponentKind::channel_group});
        }
        break;
      }
      case ComponentKind::block: {
        const BlockSite& s = sites[static_cast<size_t>(comp.block)];
        BasicBlockParams& bp = blocks[static_cast<size_t>(comp.block)];
        const int64_t in = s.shape.in_channels, out = s.shape.out_channels;
        ChannelGroupParams& cg = bp.groups[0];
        cg.conv1 = params_.declare(s.prefix + "conv1.weight", {out, in, 3, 3}, g, InitKind::normal,
                                   conv_std(out, 3));
        collect({cg.conv1});
        cg.bn1 = declare_bn(s.prefix + "bn1.", out, g);
        collect_bn(cg.bn1);
        cg.conv2 = params_.declare(s.prefix + "conv2.weight", {out, out, 3, 3}, g,
                                   InitKind::normal, conv_std(out, 3));
        collect({cg.conv2});
        bp.bn2 = declare_bn(s.prefix + "bn2.", out, g);
        collect_bn(bp.bn2);
        break;
      }
      case ComponentKind::channel_group: {
        const BlockSite& s = sites[static_cast<size_t>(comp.block)];
        const int64_t in = s.shape.in_channels, out = s.shape.out_channels;
        const int64_t width = out / G, start = comp.index * width;
        const std::string label = "channels." + std::to_string(comp.index);
        ChannelGroupParams& cg =
            blocks[static_cast<size_t>(comp.block)].groups[static_cast<size_t>(comp.index)];
        cg.conv1 = params_.declare_piece(s.prefix + "conv1.weight", {out, in, 3, 3}, 0, start,
                                         width, label, g, InitKind::normal, conv_std(out, 3));
        const std::string bn1 = s.prefix + "bn1.";
        cg.bn1.weight = params_.declare_piece(bn1 + "weight", {out}, 0, start, width, label, g,
                                              InitKind::ones);
        cg.bn1.bias = params_.declare_piece(bn1 + "bias", {out}, 0, start, width, label, g,
                                            InitKind::zeros);
        cg.bn1.running_mean = params_.declare_buffer_piece(bn1 + "running_mean", {out}, 0, start,
                                                           width, label, g, InitKind::zeros);
        cg.bn1.running_var = params_.declare_buffer_piece(bn1 + "running_var", {out}, 0, start,
                                                          width, label, g, InitKind::ones);
        cg.conv2 = params_.declare_piece(s.prefix + "conv2.weight", {out, out, 3, 3}, 1, start,
                                         width, label, g, InitKind::normal, conv_std(out, 3));
        collect({cg.conv1, cg.conv2});
        collect_bn(cg.bn1);
        break;
      }
      default:
        fail("component ", comp.name, " of kind ", component_kind_name(comp.kind),
             " does not belong to a ResNet");
    }
  }
  std::vector<TrunkBlock*> trunk_blocks;
  for (size_t b = 0; b < sites.size(); ++b) {
    blocks_.push_back(std::make_unique<BasicBlock>(sites[b].shape, bn_, params_,
                                                   static_cast<int>(b), std::move(blocks[b])));
    trunk_blocks.push_back(blocks_.back().get());
  }
  set_blocks(std::move(trunk_blocks));
}

bool ResNetModel::block_runs(size_t b) const { return blocks_[b]->runs(); }

std::vector<int> ResNetModel::input_site_params() const {
  return {stem_conv_, stem_bn_.weight, stem_bn_.bias};
}

namespace {
// What the stem keeps for its backward.
struct StemSaved : StageContext {
  Tensor images;                 // [B, Cin, H, W] (the caller's)
  OwnedTensor a, mean, invstd;   // conv output [B, C0, H, W]; bn stats [C0]
};
// What pooling and the classifier keep (the logits are the HeadContext's).
struct PoolSaved : StageContext {
  OwnedTensor pooled;            // [B, C_last]
};
}  // namespace

OwnedTensor ResNetModel::input_forward(const Tensor& images, bool train,
                                       std::unique_ptr<StageContext>& saved) {
  Allocator& alloc = *alloc_;
  const int64_t B = images.size(0), H = images.size(2), W = images.size(3);
  const int64_t C0 = config_.widths[0];
  const DType st = accum_dtype(dtype_);
  const BlockMode mode = train ? BlockMode::train : BlockMode::eval;

  auto stem = std::make_unique<StemSaved>();
  stem->images = images;
  hooks_.call_needed(0, ParamPass::forward);
  stem->a = OwnedTensor(alloc, {B, C0, H, W}, dtype_, kSaved);  // stem conv output
  layers::conv_forward(images, params_.param(stem_conv_), {3, 1, 1}, *stem->a, alloc);
  OwnedTensor h(alloc, {B, C0, H, W}, dtype_, kSaved);  // relu(bn(a)): stream entry 0
  if (train) {
    stem->mean = OwnedTensor(alloc, {C0}, st, kSaved);
    stem->invstd = OwnedTensor(alloc, {C0}, st, kSaved);
  }
  layers::batchnorm(params_, stem_bn_, bn_, *stem->a, *h, mode, &*stem->mean, &*stem->invstd);
  hooks_.call_done(0, ParamPass::forward);
  ops::relu_forward(*h, *h);
  saved = std::move(stem);  // an evaluation's too: it lives until the blocks are done
  return h;
}

Shape ResNetModel::block_input_shape(const Tensor& images, int block) const {
  if (images.ndim() != 4)
    fail("stage_input_shape: images must be [batch, channels, height, width], got ",
         images.describe());
  int64_t H = images.size(2), W = images.size(3);  // the stem keeps the resolution
  for (int b = 0; b < block; ++b) {
    // Each block's first convolution (3x3, padding 1) sets its output size.
    const Conv2dGeometry conv1{3, blocks_[static_cast<size_t>(b)]->shape().stride, 1};
    H = conv1.out_size(H);
    W = conv1.out_size(W);
  }
  return {images.size(0), blocks_[static_cast<size_t>(block)]->shape().in_channels, H, W};
}

Shape ResNetModel::check_inputs(const Tensor& images) const {
  if (images.ndim() != 4 || images.size(1) != config_.in_channels)
    fail("forward: images must be [batch, ", config_.in_channels, ", height, width], got ",
         images.describe());
  expect_dtype(images, dtype_, "forward", "images");
  return {images.size(0)};
}

Shape ResNetModel::check_received(const Tensor& received) const {
  const int64_t C = blocks_[static_cast<size_t>(stage_.first_block)]->shape().in_channels;
  if (received.ndim() != 4 || received.size(1) != C)
    fail("forward_stage: the received activation must be [batch, ", C, ", height, width], got ",
         received.describe());
  return {received.size(0)};
}

void ResNetModel::output_forward(const Tensor& trunk_output, bool train, HeadContext& head) {
  (void)train;
  const int64_t B = trunk_output.size(0), C = config_.widths[3], K = config_.num_classes;
  auto s = std::make_unique<PoolSaved>();
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::forward);
  s->pooled = OwnedTensor(*alloc_, {B, C}, dtype_, kSaved);  // [B, C]
  ops::global_avg_pool_forward(trunk_output, *s->pooled);
  head.logits = OwnedTensor(*alloc_, {B, K}, dtype_, kSaved);  // [B, K]
  ops::linear_forward(*s->pooled, params_.param(fc_weight_), *head.logits);
  ops::bias_add_forward(*head.logits, params_.param(fc_bias_));
  hooks_.call_done(head_site, ParamPass::forward);
  head.saved = std::move(s);
}

OwnedTensor ResNetModel::output_backward(HeadContext& head, const Tensor& trunk_output,
                                         const GradsReady& ready) {
  const PoolSaved& s = static_cast<const PoolSaved&>(*head.saved);
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::backward);
  OwnedTensor dpooled(*alloc_, s.pooled->shape(), dtype_, kSaved);  // [B, C]
  ops::linear_backward_input(*head.logits, params_.param(fc_weight_), *dpooled);
  hooks_.call_done(head_site, ParamPass::backward);
  if (params_.is_trained(fc_weight_)) {
    Tensor dw = params_.grad(fc_weight_), db = params_.grad(fc_bias_);
    ops::linear_backward_weight(*head.logits, *s.pooled, dw);
    ops::bias_backward_weight(*head.logits, db);
  }
  params_.report_trained({fc_weight_, fc_bias_}, ready);
  head.release();
  OwnedTensor dh(*alloc_, trunk_output.shape(), dtype_, kSaved);  // [B, C, h, w]
  ops::global_avg_pool_backward_input(*dpooled, *dh);
  return dh;
}

void ResNetModel::input_backward(std::unique_ptr<StageContext>& saved, OwnedTensor dh,
                                 TrunkContext& trunk, const GradsReady& ready) {
  // The stem: no gradient for the images, only its weights'.
  Allocator& alloc = *alloc_;
  StemSaved& stem = static_cast<StemSaved&>(*saved);
  ops::relu_backward_input(*dh, trunk.input(), *dh);
  if (params_.is_trained(stem_bn_.weight)) {
    Tensor dw = params_.grad(stem_bn_.weight), db = params_.grad(stem_bn_.bias);
    ops::batchnorm_backward_weight(*dh, *stem.a, *stem.mean, *stem.invstd, dw, db);
  }
  if (params_.is_trained(stem_conv_)) {
    hooks_.call_needed(0, ParamPass::backward);
    ops::batchnorm_backward_input(*dh, *stem.a, params_.param(stem_bn_.weight), *stem.mean,
                                  *stem.invstd, *dh);
    hooks_.call_done(0, ParamPass::backward);
    Tensor dw = params_.grad(stem_conv_);
    layers::conv_backward_weight(*dh, stem.images, {3, 1, 1}, dw, alloc);
  }
  params_.report_trained({stem_conv_, stem_bn_.weight, stem_bn_.bias}, ready);
  saved.reset();
  dh = OwnedTensor();
  trunk_->release_input(trunk);
}

void ResNetModel::recalibrate_statistics(const BatchFeed& next) {
  SDP_CHECK(alloc_, "materialize() the model before recalibrating its statistics");
  // Start from the initial statistics (mean 0, variance 1), then average:
  // momentum 1 / (k + 1) at the k-th batch makes each running value the
  // plain mean of the batches' values (PyTorch's momentum = None).
  for (int id = 0; id < params_.count(); ++id) {
    const ParamDecl& d = params_.decl(id);
    if (!d.buffer || !params_.is_materialized(id)) continue;
    Tensor b = params_.param(id);
    ops::fill(b, d.init == InitKind::ones ? 1.0 : 0.0);
  }
  // A key of its own: micro-batches in flight keep their state.
  constexpr int kRecalibration = -1;
  const double momentum = bn_.momentum;
  Tensor images, labels;
  for (int k = 0; next(images, labels); ++k) {
    bn_.momentum = 1.0 / (k + 1);
    forward(images, labels, /*keep_for_backward=*/true, kRecalibration);
    drop_micro_batch(kRecalibration);
  }
  bn_.momentum = momentum;
}

void ResNetModel::logits(const Tensor& images, Tensor& out) {
  SDP_CHECK(alloc_, "materialize() the model before logits()");
  check_whole("logits()");
  const int64_t B = images.size(0), C = config_.widths[3], K = config_.num_classes;
  expect_shape(out, {B, K}, "logits", "out");
  TrunkContext trunk;
  const Tensor& last = evaluate_trunk(images, trunk);
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::forward);
  OwnedTensor pooled(*alloc_, {B, C}, dtype_, MemCategory::workspace);  // [B, C]
  ops::global_avg_pool_forward(last, *pooled);
  ops::linear_forward(*pooled, params_.param(fc_weight_), out);
  ops::bias_add_forward(out, params_.param(fc_bias_));
  hooks_.call_done(head_site, ParamPass::forward);
}

}  // namespace sdp::resnet
