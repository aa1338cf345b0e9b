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
  std::vector<Component> out;
  const auto sites = block_sites(config);
  const int L = static_cast<int>(sites.size());
  const bool neuron = layout.granularity == Granularity::neuron;
  if (layout.split_shared) {
    // One shared component per site that reads shared parameters: the stem,
    // each block with a downsampling shortcut (at neuron granularity every
    // block, for its bn2), the classifier.
    out.push_back({"shared.input", ComponentKind::shared, -1, 0, {}, 0, -1, 0});
    for (int b = 0; b < L; ++b)
      if (neuron || needs_projection(sites[static_cast<size_t>(b)].shape))
        out.push_back({"shared.block." + std::to_string(b), ComponentKind::shared, b, 0, {}, 0, -1,
                       1 + b});
    out.push_back({"shared.output", ComponentKind::shared, -1, 0, {}, 0, -1, L + 1});
  } else {
    out.push_back({"shared", ComponentKind::shared, -1, 0, {}, 0, -1, -1});
  }
  if (!neuron) {
    for (int b = 0; b < L; ++b)
      out.push_back({"block." + std::to_string(b), ComponentKind::block, b, 0, {}, 0, -1, 1 + b});
    return out;
  }
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
    : config_(config), bn_{config.bn_eps, config.bn_momentum}, layout_(std::move(layout)) {
  components_ = component_specs(config_, layout_);
  place_components(components_, layout_, params_);
  declare_parameters();
  count_component_numel(components_, params_);
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
  trunk_ = std::make_unique<Trunk>(params_, std::move(trunk_blocks));
  trunk_->set_hooks(&hooks_);
}

void ResNetModel::materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held,
                              const std::vector<bool>& trained,
                             const std::vector<GroupShard>& shards) {
  alloc_ = &alloc;
  dtype_ = dtype;
  params_.materialize(alloc, dtype, held, trained, shards);
  in_flight_.clear();
}

bool ResNetModel::block_runs(size_t b) const { return blocks_[b]->runs(); }

void ResNetModel::check_site(int site) const {
  if (site < 0 || site >= site_count())
    fail("site ", site, " is not a site of model ", config_.name, " (valid: 0 .. ", site_count() - 1,
         ")");
}

std::vector<int> ResNetModel::site_params(int site) const {
  check_site(site);
  if (site == 0) return {stem_conv_, stem_bn_.weight, stem_bn_.bias};
  if (site == site_count() - 1) return {fc_weight_, fc_bias_};
  std::vector<int> ids;
  for (int id : blocks_[static_cast<size_t>(site - 1)]->param_ids())
    if (id >= 0) ids.push_back(id);
  return ids;
}

Tensor ResNetModel::run_trunk(const Tensor& images, bool train, MicroBatch& m) {
  Allocator& alloc = *alloc_;
  const int64_t B = images.size(0), H = images.size(2), W = images.size(3);
  const int64_t C0 = config_.widths[0];
  const DType st = accum_dtype(dtype_);
  const BlockMode mode = train ? BlockMode::train : BlockMode::eval;

  StemSaved stem;
  stem.images = images;
  hooks_.call_needed(0, ParamPass::forward);
  stem.a = OwnedTensor(alloc, {B, C0, H, W}, dtype_, kSaved);  // stem conv output
  layers::conv_forward(images, params_.param(stem_conv_), {3, 1, 1}, *stem.a, alloc);
  OwnedTensor h(alloc, {B, C0, H, W}, dtype_, kSaved);  // relu(bn(a)): stream entry 0
  if (train) {
    stem.mean = OwnedTensor(alloc, {C0}, st, kSaved);
    stem.invstd = OwnedTensor(alloc, {C0}, st, kSaved);
  }
  layers::batchnorm(params_, stem_bn_, bn_, *stem.a, *h, mode, &*stem.mean, &*stem.invstd);
  hooks_.call_done(0, ParamPass::forward);
  ops::relu_forward(*h, *h);
  if (train) m.stem = std::move(stem);
  // The stem's backward reads its output (the ReLU): the trunk keeps it.
  return trunk_->forward(m.trunk, std::move(h), train, /*keep_input=*/train, alloc);
}

void ResNetModel::set_stage(const StageSpan& span) {
  const int L = static_cast<int>(blocks_.size());
  check_stage_span(span, L, config_.name);
  check_no_micro_batch_in_flight(in_flight_.size(), config_.name);
  stage_ = span;
  trunk_->set_block_range(span.first_block, span.end(L));
}

void ResNetModel::check_whole(const char* call) const {
  check_whole_stage(stage_, static_cast<int>(blocks_.size()), call, config_.name);
}

Shape ResNetModel::stage_input_shape(const Tensor& images, int first_block) const {
  const int L = static_cast<int>(blocks_.size());
  check_later_stage_start(first_block, L, config_.name);
  if (images.ndim() != 4)
    fail("stage_input_shape: images must be [batch, channels, height, width], got ",
         images.describe());
  int64_t H = images.size(2), W = images.size(3);  // the stem keeps the resolution
  for (int b = 0; b < first_block; ++b) {
    // Each block's first convolution (3x3, padding 1) sets its output size.
    const Conv2dGeometry conv1{3, blocks_[static_cast<size_t>(b)]->shape().stride, 1};
    H = conv1.out_size(H);
    W = conv1.out_size(W);
  }
  return {images.size(0), blocks_[static_cast<size_t>(first_block)]->shape().in_channels, H, W};
}

double ResNetModel::forward(const Tensor& images, const Tensor& labels, bool keep_for_backward,
                            int micro_batch) {
  check_whole(keep_for_backward ? "forward()" : "forward(keep_for_backward = false)");
  return run_stage(images, labels, OwnedTensor(), keep_for_backward, micro_batch);
}

double ResNetModel::forward_stage(const Tensor& images, const Tensor& labels, OwnedTensor received,
                                  int micro_batch) {
  return run_stage(images, labels, std::move(received), true, micro_batch);
}

double ResNetModel::run_stage(const Tensor& images, const Tensor& labels, OwnedTensor received,
                              bool train, int micro_batch) {
  SDP_CHECK(alloc_, "materialize() the model before forward()");
  const int L = static_cast<int>(blocks_.size());
  const bool first = stage_.has_input_stage(), last = stage_.has_output_stage(L);
  int64_t B = 0;
  if (first) {
    SDP_CHECK(!received, "forward: the first stage runs the stem on its images and receives ",
              "nothing, got ", received->describe());
    if (images.ndim() != 4 || images.size(1) != config_.in_channels)
      fail("forward: images must be [batch, ", config_.in_channels, ", height, width], got ",
           images.describe());
    expect_dtype(images, dtype_, "forward", "images");
    B = images.size(0);
  } else {
    const int64_t C = blocks_[static_cast<size_t>(stage_.first_block)]->shape().in_channels;
    SDP_CHECK(received, "forward_stage: stage ", stage_.describe(L), " of model ", config_.name,
              " needs the previous stage's output [batch, ", C, ", height, width]");
    if (received->ndim() != 4 || received->size(1) != C)
      fail("forward_stage: the received activation must be [batch, ", C,
           ", height, width], got ", received->describe());
    expect_dtype(*received, dtype_, "forward_stage", "received");
    B = received->size(0);
  }
  if (last) {
    expect_shape(labels, {B}, "forward", "labels");
    expect_dtype(labels, DType::i32, "forward", "labels");
  }
  const int64_t C = config_.widths[3], K = config_.num_classes;
  const DType st = accum_dtype(dtype_);
  // A new training forward of a micro-batch replaces what it kept before.
  if (train) in_flight_.erase(micro_batch);

  MicroBatch m;
  Tensor last_entry;  // [B, C, h, w], the trunk's output
  if (first) {
    last_entry = run_trunk(images, train, m);
  } else {
    // The received stream is the trunk's input: kept until its first
    // block's backward (its ReLU needs no stem here).
    last_entry = trunk_->forward(m.trunk, std::move(received), train, /*keep_input=*/false, *alloc_);
  }
  if (!last) {
    // Non-last stages are training stages only (check_whole refuses evaluation).
    in_flight_.emplace(micro_batch, std::move(m));
    return 0;
  }

  HeadSaved hs;
  hs.labels = labels;
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::forward);
  hs.pooled = OwnedTensor(*alloc_, {B, C}, dtype_, kSaved);
  ops::global_avg_pool_forward(last_entry, *hs.pooled);
  hs.logits = OwnedTensor(*alloc_, {B, K}, dtype_, kSaved);
  ops::linear_forward(*hs.pooled, params_.param(fc_weight_), *hs.logits);
  ops::bias_add_forward(*hs.logits, params_.param(fc_bias_));
  hooks_.call_done(head_site, ParamPass::forward);
  hs.lse = OwnedTensor(*alloc_, {B}, st, kSaved);
  OwnedTensor losses(*alloc_, {B}, st, MemCategory::workspace);  // [B]
  ops::cross_entropy_forward(*hs.logits, labels, *losses, *hs.lse);

  double total = 0;
  if (labels.device() == Device::meta) {
    total = std::numeric_limits<double>::quiet_NaN();
    valid_targets_ = B;
  } else {
    valid_targets_ = ops::count_nonnegative(labels);
    total = ops::sum(*losses);
  }
  if (train) {
    m.head = std::move(hs);
    in_flight_.emplace(micro_batch, std::move(m));
  }
  return total;
}

const Tensor& ResNetModel::stage_output(int micro_batch) const {
  check_hands_on(stage_, static_cast<int>(blocks_.size()), config_.name);
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && !it->second.trunk.backward_started, "stage_output of micro-batch ",
            micro_batch, " without its stage forward (or after its backward)");
  return it->second.trunk.output();
}

void ResNetModel::backward(double loss_scale, bool split_weight_grads, const GradsReady& ready,
                           int micro_batch) {
  check_whole("backward()");
  backward_stage(OwnedTensor(), loss_scale, split_weight_grads, ready, micro_batch);
}

OwnedTensor ResNetModel::backward_stage(OwnedTensor output_grad, double loss_scale,
                                            bool split_weight_grads, const GradsReady& ready,
                                            int micro_batch) {
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && !it->second.trunk.backward_started, "backward() of micro-batch ",
            micro_batch, " without a preceding training forward() of it");
  SDP_CHECK(params_.has_grads(), "backward() needs allocated gradients (allocate_grads())");
  Allocator& alloc = *alloc_;
  MicroBatch& m = it->second;
  const int L = static_cast<int>(blocks_.size());
  const bool first = stage_.has_input_stage(), last = stage_.has_output_stage(L);
  OwnedTensor dh;  // [B, C, h, w], the gradient of the trunk's output entry
  if (last) {
    SDP_CHECK(!output_grad, "backward_stage: the last stage starts from its loss; got an output ",
              "gradient ", output_grad->describe());
    HeadSaved& h = *m.head;
    const int head_site = site_count() - 1;
    // The logits' storage becomes their gradient.
    ops::cross_entropy_backward_input(*h.logits, h.labels, *h.lse, loss_scale, *h.logits);
    hooks_.call_needed(head_site, ParamPass::backward);
    OwnedTensor dpooled(alloc, h.pooled->shape(), dtype_, kSaved);  // [B, C]
    ops::linear_backward_input(*h.logits, params_.param(fc_weight_), *dpooled);
    hooks_.call_done(head_site, ParamPass::backward);
    if (params_.is_trained(fc_weight_)) {
      Tensor dw = params_.grad(fc_weight_), db = params_.grad(fc_bias_);
      ops::linear_backward_weight(*h.logits, *h.pooled, dw);
      ops::bias_backward_weight(*h.logits, db);
    }
    params_.report_trained({fc_weight_, fc_bias_}, ready);
    m.head.reset();
    dh = OwnedTensor(alloc, m.trunk.output().shape(), dtype_, kSaved);  // [B, C, h, w]
    ops::global_avg_pool_backward_input(*dpooled, *dh);
  } else {
    SDP_CHECK(output_grad, "backward_stage: stage ", stage_.describe(L),
              " needs the next stage's gradient of its output");
    expect_shape(*output_grad, m.trunk.output().shape(), "backward_stage", "output_grad");
    expect_dtype(*output_grad, dtype_, "backward_stage", "output_grad");
    dh = std::move(output_grad);
  }

  dh = trunk_->backward(m.trunk, std::move(dh), split_weight_grads, ready, alloc);

  if (first) {
    // The stem: no gradient for the images, only its weights'.
    StemSaved& stem = *m.stem;
    ops::relu_backward_input(*dh, m.trunk.input(), *dh);
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
    m.stem.reset();
    dh = OwnedTensor();
    trunk_->release_input(m.trunk);
  }
  if (!split_weight_grads) in_flight_.erase(it);
  return dh;
}

void ResNetModel::backward_weight(const GradsReady& ready, int micro_batch) {
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && it->second.trunk.backward_started,
            "backward_weight() of micro-batch ", micro_batch,
            " needs backward(split_weight_grads = true) of it first");
  trunk_->backward_weight(it->second.trunk, ready, *alloc_);
  in_flight_.erase(it);
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
    in_flight_.erase(kRecalibration);
  }
  bn_.momentum = momentum;
}

void ResNetModel::logits(const Tensor& images, Tensor& out) {
  SDP_CHECK(alloc_, "materialize() the model before logits()");
  check_whole("logits()");
  const int64_t B = images.size(0), C = config_.widths[3], K = config_.num_classes;
  expect_shape(out, {B, K}, "logits", "out");
  MicroBatch m;
  const Tensor last = run_trunk(images, false, m);
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::forward);
  OwnedTensor pooled(*alloc_, {B, C}, dtype_, MemCategory::workspace);  // [B, C]
  ops::global_avg_pool_forward(last, *pooled);
  ops::linear_forward(*pooled, params_.param(fc_weight_), out);
  ops::bias_add_forward(out, params_.param(fc_bias_));
  hooks_.call_done(head_site, ParamPass::forward);
}

}  // namespace sdp::resnet
