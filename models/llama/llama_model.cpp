#include "models/llama/llama_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "models/common/component_groups.h"
#include "models/common/stage_checks.h"

namespace sdp::llama {

std::vector<Component> LlamaModel::component_specs(const LlamaConfig& config,
                                                   const ModelLayout& layout) {
  config.validate();
  std::vector<Component> out;
  const int L = config.n_layers;
  const bool neuron = layout.granularity == Granularity::neuron;
  if (layout.split_shared) {
    // One shared component per site that reads shared parameters; a tied
    // embedding stays with the input (set_stage keeps such a model whole).
    out.push_back({"shared.input", ComponentKind::shared, -1, 0, {}, 0, -1, 0});
    if (neuron)  // the blocks' norms, read by every neuron group of the block
      for (int b = 0; b < L; ++b)
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
  const int64_t F = config.ffn_dim, Hkv = config.n_kv_heads;
  if (layout.ffn_groups < 1 || F % layout.ffn_groups != 0)
    fail("ffn_groups = ", layout.ffn_groups, " must divide the FFN size ", F, " of model ",
         config.name);
  if (layout.head_groups < 1 || Hkv % layout.head_groups != 0)
    fail("head_groups = ", layout.head_groups, " must divide the number of KV heads ", Hkv,
         " of model ", config.name);
  for (int g = 0; g < std::max(layout.ffn_groups, layout.head_groups); ++g)
    for (int b = 0; b < L; ++b) {
      const std::string block = "block." + std::to_string(b);
      if (g < layout.ffn_groups)
        out.push_back({block + ".ffn." + std::to_string(g), ComponentKind::ffn_group, b, g, {}, 0,
                       -1, 1 + b});
      if (g < layout.head_groups)
        out.push_back({block + ".heads." + std::to_string(g), ComponentKind::head_group, b, g, {},
                       0, -1, 1 + b});
    }
  return out;
}

LlamaModel::LlamaModel(const LlamaConfig& config, ModelLayout layout)
    : config_(config), layout_(std::move(layout)) {
  components_ = component_specs(config_, layout_);
  place_components(components_, layout_, params_);
  declare_parameters();
  count_component_numel(components_, params_);
}

void LlamaModel::declare_parameters() {
  const LlamaConfig& c = config_;
  const int64_t D = c.dim, V = c.vocab, F = c.ffn_dim, Dh = c.head_dim();
  const int64_t q_out = c.n_heads * Dh, kv_out = c.n_kv_heads * Dh;
  // GPT-2 style scaling of the projections that write into the residual
  // stream keeps its variance from growing with depth.
  const double std = 0.02, out_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layers));
  const bool neuron = layout_.granularity == Granularity::neuron;
  const int head_groups = neuron ? layout_.head_groups : 1;
  const int ffn_groups = neuron ? layout_.ffn_groups : 1;
  std::vector<BlockParams> blocks(static_cast<size_t>(c.n_layers));
  for (BlockParams& b : blocks) {
    b.heads.resize(static_cast<size_t>(head_groups));
    b.ffn.resize(static_cast<size_t>(ffn_groups));
  }
  auto layer = [](int b) { return "model.layers." + std::to_string(b) + "."; };

  for (Component& comp : components_) {
    auto add = [&](int id) { comp.params.push_back(id); return id; };
    const int g = comp.group;
    switch (comp.kind) {
      case ComponentKind::shared: {
        // The unsplit shared component (site -1) holds what every site
        // reads; a split one (ModelLayout::split_shared) its own site's.
        // shared.input comes first, so a tied head finds the embedding.
        auto serves = [&](int site) { return comp.site < 0 || comp.site == site; };
        if (serves(0))
          embed_ = add(params_.declare("model.embed_tokens.weight", {V, D}, g, InitKind::normal, std));
        if (serves(c.n_layers + 1)) {
          final_norm_ = add(params_.declare("model.norm.weight", {D}, g, InitKind::ones));
          head_ = c.tie_embeddings
                      ? embed_
                      : add(params_.declare("lm_head.weight", {V, D}, g, InitKind::normal, std));
        }
        if (!neuron) break;
        // Every neuron group of a block reads its norms: they stay shared.
        for (int b = 0; b < c.n_layers; ++b) {
          if (!serves(1 + b)) continue;
          BlockParams& bp = blocks[static_cast<size_t>(b)];
          bp.norm1 = add(params_.declare(layer(b) + "input_layernorm.weight", {D}, g, InitKind::ones));
          bp.norm2 = add(params_.declare(layer(b) + "post_attention_layernorm.weight", {D}, g,
                                         InitKind::ones));
        }
        break;
      }
      case ComponentKind::block: {
        const std::string pre = layer(comp.block);
        BlockParams& bp = blocks[static_cast<size_t>(comp.block)];
        HeadGroupParams& h = bp.heads[0];
        FfnGroupParams& f = bp.ffn[0];
        bp.norm1 = add(params_.declare(pre + "input_layernorm.weight", {D}, g, InitKind::ones));
        h.wq = add(params_.declare(pre + "self_attn.q_proj.weight", {q_out, D}, g, InitKind::normal, std));
        h.wk = add(params_.declare(pre + "self_attn.k_proj.weight", {kv_out, D}, g, InitKind::normal, std));
        h.wv = add(params_.declare(pre + "self_attn.v_proj.weight", {kv_out, D}, g, InitKind::normal, std));
        h.wo = add(params_.declare(pre + "self_attn.o_proj.weight", {D, q_out}, g, InitKind::normal, out_std));
        bp.norm2 = add(params_.declare(pre + "post_attention_layernorm.weight", {D}, g, InitKind::ones));
        f.wgate = add(params_.declare(pre + "mlp.gate_proj.weight", {F, D}, g, InitKind::normal, std));
        f.wup = add(params_.declare(pre + "mlp.up_proj.weight", {F, D}, g, InitKind::normal, std));
        f.wdown = add(params_.declare(pre + "mlp.down_proj.weight", {D, F}, g, InitKind::normal, out_std));
        break;
      }
      case ComponentKind::ffn_group: {
        const std::string pre = layer(comp.block), label = "ffn." + std::to_string(comp.index);
        const int64_t w = F / ffn_groups, start = comp.index * w;
        FfnGroupParams& f = blocks[static_cast<size_t>(comp.block)].ffn[static_cast<size_t>(comp.index)];
        f.wgate = add(params_.declare_piece(pre + "mlp.gate_proj.weight", {F, D}, 0, start, w, label, g,
                                            InitKind::normal, std));
        f.wup = add(params_.declare_piece(pre + "mlp.up_proj.weight", {F, D}, 0, start, w, label, g,
                                          InitKind::normal, std));
        f.wdown = add(params_.declare_piece(pre + "mlp.down_proj.weight", {D, F}, 1, start, w, label, g,
                                            InitKind::normal, out_std));
        break;
      }
      case ComponentKind::head_group: {
        const std::string pre = layer(comp.block), label = "heads." + std::to_string(comp.index);
        const int64_t q_rows = q_out / head_groups, kv_rows = kv_out / head_groups;
        HeadGroupParams& h = blocks[static_cast<size_t>(comp.block)].heads[static_cast<size_t>(comp.index)];
        h.wq = add(params_.declare_piece(pre + "self_attn.q_proj.weight", {q_out, D}, 0,
                                         comp.index * q_rows, q_rows, label, g, InitKind::normal, std));
        h.wk = add(params_.declare_piece(pre + "self_attn.k_proj.weight", {kv_out, D}, 0,
                                         comp.index * kv_rows, kv_rows, label, g, InitKind::normal, std));
        h.wv = add(params_.declare_piece(pre + "self_attn.v_proj.weight", {kv_out, D}, 0,
                                         comp.index * kv_rows, kv_rows, label, g, InitKind::normal, std));
        h.wo = add(params_.declare_piece(pre + "self_attn.o_proj.weight", {D, q_out}, 1,
                                         comp.index * q_rows, q_rows, label, g, InitKind::normal, out_std));
        break;
      }
      case ComponentKind::channel_group:
        fail("component ", comp.name, ": channel groups belong to ResNets, not to LLaMA");
    }
  }
  std::vector<TrunkBlock*> trunk_blocks;
  for (int b = 0; b < c.n_layers; ++b) {
    blocks_.push_back(std::make_unique<LlamaBlock>(config_, params_, rope_, b,
                                                   std::move(blocks[static_cast<size_t>(b)])));
    trunk_blocks.push_back(blocks_.back().get());
  }
  trunk_ = std::make_unique<Trunk>(params_, std::move(trunk_blocks));
  trunk_->set_hooks(&hooks_);
}

int LlamaModel::block_group(int b) const {
  for (const Component& comp : components_)
    if (comp.kind == ComponentKind::block && comp.block == b) return comp.group;
  fail("block_group(", b, "): the model is not cut into blocks (granularity ",
       granularity_name(layout_.granularity), ")");
}

void LlamaModel::materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held,
                             const std::vector<bool>& trained,
                             const std::vector<GroupShard>& shards) {
  alloc_ = &alloc;
  dtype_ = dtype;
  params_.materialize(alloc, dtype, held, trained, shards);
  const int64_t half = config_.head_dim() / 2;
  // The RoPE tables are constants of the model, not parameters.
  // In accum_dtype: angles at long positions need more than bf16's 8 bits.
  rope_.cos = OwnedTensor(alloc, {config_.max_seq, half}, accum_dtype(dtype), MemCategory::workspace);
  rope_.sin = OwnedTensor(alloc, {config_.max_seq, half}, accum_dtype(dtype), MemCategory::workspace);
  ops::rope_tables(config_.rope_theta, *rope_.cos, *rope_.sin);
  in_flight_.clear();
}

void LlamaModel::check_site(int site) const {
  if (site < 0 || site >= site_count())
    fail("site ", site, " is not a site of model ", config_.name, " (valid: 0 .. ", site_count() - 1,
         ")");
}

std::vector<int> LlamaModel::site_params(int site) const {
  check_site(site);
  if (site == 0) return {embed_};
  if (site == site_count() - 1)
    return head_ == embed_ ? std::vector<int>{final_norm_, embed_}
                           : std::vector<int>{final_norm_, head_};
  std::vector<int> ids;
  for (int id : blocks_[static_cast<size_t>(site - 1)]->param_ids())
    if (id >= 0) ids.push_back(id);
  return ids;
}

void LlamaModel::set_stage(const StageSpan& span) {
  const int L = config_.n_layers;
  check_stage_span(span, L, config_.name);
  if (config_.tie_embeddings && !span.whole(L))
    fail("set_stage: model ", config_.name, " ties its embedding to the LM head, so the input ",
         "and output stages cannot be apart (asked for ", span.describe(L),
         "); use an untied model for pipeline stages");
  check_no_micro_batch_in_flight(in_flight_.size(), config_.name);
  stage_ = span;
  trunk_->set_block_range(span.first_block, span.end(L));
}

void LlamaModel::check_whole(const char* call) const {
  check_whole_stage(stage_, config_.n_layers, call, config_.name);
}

Shape LlamaModel::stage_input_shape(const Tensor& tokens, int first_block) const {
  check_later_stage_start(first_block, config_.n_layers, config_.name);
  SDP_CHECK(tokens.ndim() == 2, "stage_input_shape: tokens must be [batch, seq], got ",
            tokens.describe());
  return {tokens.size(0), tokens.size(1), config_.dim};
}

Tensor LlamaModel::run_trunk(const Tensor& tokens, const BatchShape& shape, bool train,
                             TrunkContext& trunk) {
  const int64_t N = shape.tokens(), D = config_.dim;
  OwnedTensor x(*alloc_, {shape.batch, shape.seq, D}, dtype_, MemCategory::activation);  // [B, T, D]
  hooks_.call_needed(0, ParamPass::forward);
  Tensor x2 = x->view({N, D});
  ops::embedding_forward(tokens.view({N}), params_.param(embed_), x2);
  hooks_.call_done(0, ParamPass::forward);
  // The embedding's backward needs only the tokens: the trunk frees its
  // input once block 0 is done with it.
  const Tensor& last = trunk_->forward(trunk, std::move(x), train, /*keep_input=*/false, *alloc_);
  return last.view({N, D});
}

double LlamaModel::forward(const Tensor& tokens, const Tensor& targets, bool keep_for_backward,
                           int micro_batch) {
  check_whole(keep_for_backward ? "forward()" : "forward(keep_for_backward = false)");
  return run_stage(tokens, targets, OwnedTensor(), keep_for_backward, micro_batch);
}

double LlamaModel::forward_stage(const Tensor& tokens, const Tensor& targets, OwnedTensor received,
                                 int micro_batch) {
  return run_stage(tokens, targets, std::move(received), true, micro_batch);
}

double LlamaModel::run_stage(const Tensor& tokens, const Tensor& targets, OwnedTensor received,
                             bool train, int micro_batch) {
  SDP_CHECK(alloc_, "materialize() the model before forward()");
  const int L = config_.n_layers;
  const bool first = stage_.has_input_stage(), last = stage_.has_output_stage(L);
  const int64_t D = config_.dim, V = config_.vocab;
  BatchShape shape;
  if (first) {
    SDP_CHECK(!received, "forward: the first stage embeds its tokens and receives nothing, got ",
              received->describe());
    SDP_CHECK(tokens.ndim() == 2, "forward: tokens must be [batch, seq], got ", tokens.describe());
    expect_dtype(tokens, DType::i32, "forward", "tokens");
    shape = {tokens.size(0), tokens.size(1)};
  } else {
    SDP_CHECK(received, "forward_stage: stage ", stage_.describe(L), " of model ", config_.name,
              " needs the previous stage's output [batch, seq, ", D, "]");
    if (received->ndim() != 3 || received->size(2) != D)
      fail("forward_stage: the received activation must be [batch, seq, ", D, "], got ",
           received->describe());
    expect_dtype(*received, dtype_, "forward_stage", "received");
    shape = {received->size(0), received->size(1)};
  }
  if (last) {
    expect_shape(targets, {shape.batch, shape.seq}, "forward", "targets");
    expect_dtype(targets, DType::i32, "forward", "targets");
  }
  if (shape.seq > config_.max_seq)
    fail("forward: sequence length ", shape.seq, " exceeds the model's max_seq ", config_.max_seq);
  const int64_t N = shape.tokens();
  // A new training forward of a micro-batch replaces what it kept before.
  if (train) in_flight_.erase(micro_batch);

  MicroBatch m;
  m.tokens = tokens;
  Tensor x_last;  // [N, D], the trunk's output entry
  if (first) {
    x_last = run_trunk(tokens, shape, train, m.trunk);
  } else {
    // The received stream is the trunk's input: kept until its first block's backward.
    x_last = trunk_->forward(m.trunk, std::move(received), train, /*keep_input=*/false, *alloc_)
                 .view({N, D});
  }
  if (!last) {
    // Non-last stages are training stages only (check_whole refuses evaluation).
    in_flight_.emplace(micro_batch, std::move(m));
    return 0;
  }

  HeadContext h;
  h.shape = shape;
  h.tokens = tokens;
  h.targets = targets;
  h.x_last = x_last;
  const DType st = accum_dtype(dtype_);  // statistics and losses
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::forward);
  h.rstd = OwnedTensor(*alloc_, {N}, st, MemCategory::activation);          // [N]
  h.h = OwnedTensor(*alloc_, {N, D}, dtype_, MemCategory::activation);       // [N, D]
  ops::rmsnorm_forward(h.x_last, params_.param(final_norm_), config_.norm_eps, *h.h, *h.rstd);
  h.logits = OwnedTensor(*alloc_, {N, V}, dtype_, MemCategory::activation);  // [N, V]
  ops::linear_forward(*h.h, params_.param(head_), *h.logits);
  hooks_.call_done(head_site, ParamPass::forward);
  h.lse = OwnedTensor(*alloc_, {N}, st, MemCategory::activation);           // [N]
  OwnedTensor losses(*alloc_, {N}, st, MemCategory::workspace);             // [N]
  ops::cross_entropy_forward(*h.logits, targets.view({N}), *losses, *h.lse);

  double total = 0;
  valid_targets_ = 0;
  if (targets.device() == Device::meta) {
    total = std::numeric_limits<double>::quiet_NaN();
    valid_targets_ = N;
  } else {
    // One reduction each, on the device that holds them (one read-back on CUDA).
    valid_targets_ = ops::count_nonnegative(targets);
    total = ops::sum(*losses);
  }
  if (train) {
    m.head = std::move(h);
    in_flight_.emplace(micro_batch, std::move(m));
  }
  return total;
}

const Tensor& LlamaModel::stage_output(int micro_batch) const {
  check_hands_on(stage_, config_.n_layers, config_.name);
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && !it->second.trunk.backward_started, "stage_output of micro-batch ",
            micro_batch, " without its stage forward (or after its backward)");
  return it->second.trunk.output();
}

void LlamaModel::backward(double loss_scale, bool split_weight_grads, const GradsReady& ready,
                          int micro_batch) {
  check_whole("backward()");
  backward_stage(OwnedTensor(), loss_scale, split_weight_grads, ready, micro_batch);
}

OwnedTensor LlamaModel::backward_stage(OwnedTensor output_grad, double loss_scale,
                                           bool split_weight_grads, const GradsReady& ready,
                                           int micro_batch) {
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && !it->second.trunk.backward_started, "backward() of micro-batch ",
            micro_batch, " without a preceding training forward() of it");
  SDP_CHECK(params_.has_grads(), "backward() needs allocated gradients (allocate_grads())");
  MicroBatch& m = it->second;
  const int64_t D = config_.dim;
  const bool first = stage_.has_input_stage(), last = stage_.has_output_stage(config_.n_layers);
  OwnedTensor dx;  // [B, T, D], the gradient of the trunk's output entry
  if (last) {
    SDP_CHECK(!output_grad, "backward_stage: the last stage starts from its loss; got an output ",
              "gradient ", output_grad->describe());
    HeadContext& h = *m.head;
    const BatchShape shape = h.shape;
    const int64_t N = shape.tokens();
    const int head_site = site_count() - 1;

    // The logits' storage becomes their gradient: no second [N, V] buffer.
    ops::cross_entropy_backward_input(*h.logits, h.targets.view({N}), *h.lse, loss_scale, *h.logits);
    hooks_.call_needed(head_site, ParamPass::backward);
    OwnedTensor dh(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
    ops::linear_backward_input(*h.logits, params_.param(head_), *dh);
    if (params_.is_trained(head_)) {
      Tensor d_head = params_.grad(head_);
      ops::linear_backward_weight(*h.logits, *h.h, d_head);
    }
    h.logits = OwnedTensor();
    dx = OwnedTensor(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
    ops::rmsnorm_backward_input(*dh, h.x_last, params_.param(final_norm_), *h.rstd, *dx);
    hooks_.call_done(head_site, ParamPass::backward);
    if (params_.is_trained(final_norm_)) {
      Tensor d_final_norm = params_.grad(final_norm_);
      ops::rmsnorm_backward_weight(*dh, h.x_last, *h.rstd, d_final_norm);
    }
    dh = OwnedTensor();
    m.head.reset();
    // A tied head's gradient is final only after the embedding's part.
    params_.report_trained({final_norm_, config_.tie_embeddings ? -1 : head_}, ready);
    dx.view = dx->view({shape.batch, shape.seq, D});  // [B, T, D], as the stream
  } else {
    SDP_CHECK(output_grad, "backward_stage: stage ", stage_.describe(config_.n_layers),
              " needs the next stage's gradient of its output");
    expect_shape(*output_grad, m.trunk.output().shape(), "backward_stage", "output_grad");
    expect_dtype(*output_grad, dtype_, "backward_stage", "output_grad");
    dx = std::move(output_grad);
  }

  dx = trunk_->backward(m.trunk, std::move(dx), split_weight_grads, ready, *alloc_);
  if (first) {
    const int64_t N = m.tokens.numel();
    if (params_.is_trained(embed_)) {
      Tensor d_embed = params_.grad(embed_);
      ops::embedding_backward_weight(m.tokens.view({N}), dx->view({N, D}), d_embed);
    }
    params_.report_trained({embed_}, ready);
    dx = OwnedTensor();
  }
  if (!split_weight_grads) in_flight_.erase(it);
  return dx;
}

void LlamaModel::backward_weight(const GradsReady& ready, int micro_batch) {
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && it->second.trunk.backward_started, "backward_weight() of micro-batch ",
            micro_batch, " needs backward(split_weight_grads = true) of it first");
  trunk_->backward_weight(it->second.trunk, ready, *alloc_);
  in_flight_.erase(it);
}

void LlamaModel::logits(const Tensor& tokens, Tensor& out) {
  SDP_CHECK(alloc_, "materialize() the model before logits()");
  check_whole("logits()");
  SDP_CHECK(tokens.ndim() == 2, "logits: tokens must be [batch, seq], got ", tokens.describe());
  const BatchShape shape{tokens.size(0), tokens.size(1)};
  const int64_t N = shape.tokens(), D = config_.dim, V = config_.vocab;
  expect_shape(out, {shape.batch, shape.seq, V}, "logits", "out");
  TrunkContext trunk;
  const Tensor x = run_trunk(tokens, shape, false, trunk);
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::forward);
  OwnedTensor rstd(*alloc_, {N}, accum_dtype(dtype_), MemCategory::workspace);  // [N]
  OwnedTensor h(*alloc_, {N, D}, dtype_, MemCategory::workspace);     // [N, D]
  ops::rmsnorm_forward(x, params_.param(final_norm_), config_.norm_eps, *h, *rstd);
  Tensor out2 = out.view({N, V});
  ops::linear_forward(*h, params_.param(head_), out2);
  hooks_.call_done(head_site, ParamPass::forward);
}

size_t LlamaModel::saved_activation_bytes(const BatchShape& shape) const {
  SDP_CHECK(alloc_, "materialize() the model before planning activations");
  const int64_t N = shape.tokens();
  const size_t e = dtype_size(dtype_), es = dtype_size(accum_dtype(dtype_));
  auto bytes = [&](int64_t numel) { return alloc_->rounded(static_cast<size_t>(numel) * e); };
  auto stat_bytes = [&](int64_t numel) { return alloc_->rounded(static_cast<size_t>(numel) * es); };
  size_t total = 0;
  for (const auto& block : blocks_) {
    if (!block->runs() || !trunk_->in_range(block->index())) continue;
    total += bytes(N * config_.dim);  // its input, a stream entry (a later stage's: received)
    if (!trunk_->checkpointed(block->index()))
      total += block->saved_context_bytes(shape, dtype_, *alloc_);
  }
  // Last block output (a non-last stage's stage_output), and on the last
  // stage the final norm (rstd, h), logits, lse.
  total += bytes(N * config_.dim);
  if (stage_.has_output_stage(config_.n_layers))
    total += bytes(N * config_.dim) + 2 * stat_bytes(N) + bytes(N * config_.vocab);
  return total;
}

}  // namespace sdp::llama
