#include "models/llama/llama_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "models/common/component_groups.h"

namespace sdp::llama {

std::vector<Component> LlamaModel::component_specs(const LlamaConfig& config,
                                                   const ModelLayout& layout) {
  config.validate();
  std::vector<Component> out;
  out.push_back({"shared", ComponentKind::shared, -1, 0, {}, 0, -1});
  const int L = config.n_layers;
  if (layout.granularity == Granularity::block) {
    for (int b = 0; b < L; ++b)
      out.push_back({"block." + std::to_string(b), ComponentKind::block, b, 0, {}, 0, -1});
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
        out.push_back({block + ".ffn." + std::to_string(g), ComponentKind::ffn_group, b, g, {}, 0, -1});
      if (g < layout.head_groups)
        out.push_back({block + ".heads." + std::to_string(g), ComponentKind::head_group, b, g, {}, 0, -1});
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
        embed_ = add(params_.declare("model.embed_tokens.weight", {V, D}, g, InitKind::normal, std));
        final_norm_ = add(params_.declare("model.norm.weight", {D}, g, InitKind::ones));
        head_ = c.tie_embeddings
                    ? embed_
                    : add(params_.declare("lm_head.weight", {V, D}, g, InitKind::normal, std));
        if (!neuron) break;
        // Every neuron group of a block reads its norms: they stay shared.
        for (int b = 0; b < c.n_layers; ++b) {
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
  for (int b = 0; b < c.n_layers; ++b)
    blocks_.push_back(std::make_unique<LlamaBlock>(config_, params_, b,
                                                   std::move(blocks[static_cast<size_t>(b)])));
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
  rope_cos_ = OwnedTensor(alloc, {config_.max_seq, half}, accum_dtype(dtype), MemCategory::workspace);
  rope_sin_ = OwnedTensor(alloc, {config_.max_seq, half}, accum_dtype(dtype), MemCategory::workspace);
  ops::rope_tables(config_.rope_theta, *rope_cos_, *rope_sin_);
}

OwnedTensor LlamaModel::run_trunk(const Tensor& tokens, const BatchShape& shape, bool save) {
  const int64_t N = shape.tokens(), D = config_.dim;
  OwnedTensor x(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
  ops::embedding_forward(tokens.view({N}), params_.param(embed_), *x);  // x: [N, D]
  for (auto& block : blocks_) {
    if (!block->active()) continue;  // B-SDP: the residual stream passes an unheld block
    x = block->forward(std::move(x), shape, *rope_cos_, *rope_sin_, *alloc_);
    if (!save) block->release();
  }
  return x;
}

double LlamaModel::forward(const Tensor& tokens, const Tensor& targets, bool keep_for_backward) {
  SDP_CHECK(alloc_, "materialize() the model before forward()");
  SDP_CHECK(tokens.ndim() == 2, "forward: tokens must be [batch, seq], got ", tokens.describe());
  expect_shape(targets, tokens.shape(), "forward", "targets");
  expect_dtype(tokens, DType::i32, "forward", "tokens");
  expect_dtype(targets, DType::i32, "forward", "targets");
  const BatchShape shape{tokens.size(0), tokens.size(1)};
  if (shape.seq > config_.max_seq)
    fail("forward: sequence length ", shape.seq, " exceeds the model's max_seq ", config_.max_seq);
  const int64_t N = shape.tokens(), D = config_.dim, V = config_.vocab;

  HeadContext h;
  h.shape = shape;
  h.tokens = tokens;
  h.targets = targets;
  h.x_last = run_trunk(tokens, shape, keep_for_backward);
  const DType st = accum_dtype(dtype_);  // statistics and losses
  h.rstd = OwnedTensor(*alloc_, {N}, st, MemCategory::activation);          // [N]
  h.h = OwnedTensor(*alloc_, {N, D}, dtype_, MemCategory::activation);       // [N, D]
  ops::rmsnorm_forward(*h.x_last, params_.param(final_norm_), config_.norm_eps, *h.h, *h.rstd);
  h.logits = OwnedTensor(*alloc_, {N, V}, dtype_, MemCategory::activation);  // [N, V]
  ops::linear_forward(*h.h, params_.param(head_), *h.logits);
  h.lse = OwnedTensor(*alloc_, {N}, st, MemCategory::activation);           // [N]
  OwnedTensor losses(*alloc_, {N}, st, MemCategory::workspace);             // [N]
  ops::cross_entropy_forward(*h.logits, targets.view({N}), *losses, *h.lse);

  double total = 0;
  valid_targets_ = 0;
  if (tokens.device() == Device::meta) {
    total = std::numeric_limits<double>::quiet_NaN();
    valid_targets_ = N;
  } else {
    // One reduction each, on the device that holds them (one read-back on CUDA).
    valid_targets_ = ops::count_nonnegative(targets);
    total = ops::sum(*losses);
  }
  if (keep_for_backward) head_ctx_ = std::move(h);
  return total;
}

namespace {

// The trained parameters among `ids`, reported to `ready` when it is set.
void report_trained(const ParameterSet& p, std::initializer_list<int> ids, const GradsReady& ready) {
  if (!ready) return;
  std::vector<int> trained;
  for (int id : ids)
    if (id >= 0 && p.is_trained(id)) trained.push_back(id);
  if (!trained.empty()) ready(trained);
}

void report_block(const ParameterSet& p, const LlamaBlock& block, const GradsReady& ready) {
  if (!ready) return;
  const BlockParams& b = block.ids();
  std::vector<int> trained;
  for (int id : {b.norm1, b.norm2})
    if (id >= 0 && p.is_trained(id)) trained.push_back(id);
  for (const HeadGroupParams& h : b.heads)
    for (int id : {h.wq, h.wk, h.wv, h.wo})
      if (id >= 0 && p.is_trained(id)) trained.push_back(id);
  for (const FfnGroupParams& f : b.ffn)
    for (int id : {f.wgate, f.wup, f.wdown})
      if (id >= 0 && p.is_trained(id)) trained.push_back(id);
  if (!trained.empty()) ready(trained);
}

}  // namespace

void LlamaModel::backward(double loss_scale, bool split_weight_grads, const GradsReady& ready) {
  SDP_CHECK(head_ctx_, "backward() without a preceding forward()");
  SDP_CHECK(params_.has_grads(), "backward() needs allocated gradients (allocate_grads())");
  HeadContext& h = *head_ctx_;
  const int64_t N = h.shape.tokens(), D = config_.dim;

  // The logits' storage becomes their gradient: no second [N, V] buffer.
  ops::cross_entropy_backward_input(*h.logits, h.targets.view({N}), *h.lse, loss_scale, *h.logits);
  OwnedTensor dh(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
  ops::linear_backward_input(*h.logits, params_.param(head_), *dh);
  if (params_.is_trained(head_)) {
    Tensor d_head = params_.grad(head_);
    ops::linear_backward_weight(*h.logits, *h.h, d_head);
  }
  h.logits = OwnedTensor();
  OwnedTensor dx(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
  ops::rmsnorm_backward_input(*dh, *h.x_last, params_.param(final_norm_), *h.rstd, *dx);
  if (params_.is_trained(final_norm_)) {
    Tensor d_final_norm = params_.grad(final_norm_);
    ops::rmsnorm_backward_weight(*dh, *h.x_last, *h.rstd, d_final_norm);
  }
  dh = OwnedTensor();
  const Tensor tokens = h.tokens;
  head_ctx_.reset();
  // A tied head's gradient is final only after the embedding's part.
  report_trained(params_, {final_norm_, config_.tie_embeddings ? -1 : head_}, ready);

  for (size_t i = blocks_.size(); i-- > 0;) {
    LlamaBlock& block = *blocks_[i];
    if (!block.active()) continue;
    const bool trained = block.trained();
    dx = block.backward_input(std::move(dx), *rope_cos_, *rope_sin_, trained, *alloc_);
    if (trained && !split_weight_grads) {
      block.backward_weight();
      report_block(params_, block, ready);
    }
  }
  if (params_.is_trained(embed_)) {
    Tensor d_embed = params_.grad(embed_);
    ops::embedding_backward_weight(tokens.view({N}), *dx, d_embed);
  }
  report_trained(params_, {embed_}, ready);
}

void LlamaModel::backward_weight(const GradsReady& ready) {
  for (size_t i = blocks_.size(); i-- > 0;)
    if (blocks_[i]->active() && blocks_[i]->trained()) {
      blocks_[i]->backward_weight();
      report_block(params_, *blocks_[i], ready);
    }
}

void LlamaModel::logits(const Tensor& tokens, Tensor& out) {
  SDP_CHECK(alloc_, "materialize() the model before logits()");
  SDP_CHECK(tokens.ndim() == 2, "logits: tokens must be [batch, seq], got ", tokens.describe());
  const BatchShape shape{tokens.size(0), tokens.size(1)};
  const int64_t N = shape.tokens(), D = config_.dim, V = config_.vocab;
  expect_shape(out, {shape.batch, shape.seq, V}, "logits", "out");
  OwnedTensor x = run_trunk(tokens, shape, false);
  OwnedTensor rstd(*alloc_, {N}, accum_dtype(dtype_), MemCategory::workspace);  // [N]
  OwnedTensor h(*alloc_, {N, D}, dtype_, MemCategory::workspace);     // [N, D]
  ops::rmsnorm_forward(*x, params_.param(final_norm_), config_.norm_eps, *h, *rstd);
  Tensor out2 = out.view({N, V});
  ops::linear_forward(*h, params_.param(head_), out2);
}

size_t LlamaModel::saved_activation_bytes(const BatchShape& shape) const {
  SDP_CHECK(alloc_, "materialize() the model before planning activations");
  const int64_t N = shape.tokens();
  const size_t e = dtype_size(dtype_), es = dtype_size(accum_dtype(dtype_));
  auto bytes = [&](int64_t numel) { return alloc_->rounded(static_cast<size_t>(numel) * e); };
  auto stat_bytes = [&](int64_t numel) { return alloc_->rounded(static_cast<size_t>(numel) * es); };
  size_t total = 0;
  for (const auto& block : blocks_)
    if (block->active()) total += block->saved_activation_bytes(shape, dtype_, *alloc_);
  // Last block output, final norm (rstd, h), logits, lse.
  total += 2 * bytes(N * config_.dim) + 2 * stat_bytes(N) + bytes(N * config_.vocab);
  return total;
}

}  // namespace sdp::llama
