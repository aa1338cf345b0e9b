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
  const int L = config.n_layers;
  const bool neuron = layout.granularity == Granularity::neuron;
  // A tied embedding stays with the input (set_stage keeps such a model
  // whole); at neuron granularity each block shares its norms.
  std::vector<Component> out =
      shared_and_block_components(L, layout, [neuron](int) { return neuron; });
  if (!neuron) return out;
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
    : BlockModel(std::move(layout)), config_(config) {
  build_components(component_specs(config_, layout_), [this] { declare_parameters(); });
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
          sublayer_params_.push_back({bp.norm1, b, ComponentKind::head_group});
          sublayer_params_.push_back({bp.norm2, b, ComponentKind::ffn_group});
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
  set_blocks(std::move(trunk_blocks));
}

int LlamaModel::block_group(int b) const {
  for (const Component& comp : components_)
    if (comp.kind == ComponentKind::block && comp.block == b) return comp.group;
  fail("block_group(", b, "): the model is not cut into blocks (granularity ",
       granularity_name(layout_.granularity), ")");
}

void LlamaModel::materialize_constants() {
  const int64_t half = config_.head_dim() / 2;
  // The RoPE tables are constants of the model, not parameters.
  // In accum_dtype: angles at long positions need more than bf16's 8 bits.
  rope_.cos = OwnedTensor(*alloc_, {config_.max_seq, half}, accum_dtype(dtype_), MemCategory::workspace);
  rope_.sin = OwnedTensor(*alloc_, {config_.max_seq, half}, accum_dtype(dtype_), MemCategory::workspace);
  ops::rope_tables(config_.rope_theta, *rope_.cos, *rope_.sin);
}

std::vector<int> LlamaModel::output_site_params() const {
  return head_ == embed_ ? std::vector<int>{final_norm_, embed_}
                         : std::vector<int>{final_norm_, head_};
}

void LlamaModel::set_stage(const StageSpan& span) {
  const int L = config_.n_layers;
  check_stage_span(span, L, config_.name);
  if (config_.tie_embeddings && !span.whole(L))
    fail("set_stage: model ", config_.name, " ties its embedding to the LM head, so the input ",
         "and output stages cannot be apart (asked for ", span.describe(L),
         "); use an untied model for pipeline stages");
  BlockModel::set_stage(span);
}

Shape LlamaModel::block_input_shape(const Tensor& tokens, int block) const {
  (void)block;  // every block reads the residual stream [B, T, D]
  SDP_CHECK(tokens.ndim() == 2, "stage_input_shape: tokens must be [batch, seq], got ",
            tokens.describe());
  return {tokens.size(0), tokens.size(1), config_.dim};
}

void LlamaModel::check_seq(int64_t seq) const {
  if (seq > config_.max_seq)
    fail("forward: sequence length ", seq, " exceeds the model's max_seq ", config_.max_seq);
}

Shape LlamaModel::check_inputs(const Tensor& tokens) const {
  SDP_CHECK(tokens.ndim() == 2, "forward: tokens must be [batch, seq], got ", tokens.describe());
  expect_dtype(tokens, DType::i32, "forward", "tokens");
  check_seq(tokens.size(1));
  return {tokens.size(0), tokens.size(1)};
}

Shape LlamaModel::check_received(const Tensor& received) const {
  const int64_t D = config_.dim;
  if (received.ndim() != 3 || received.size(2) != D)
    fail("forward_stage: the received activation must be [batch, seq, ", D, "], got ",
         received.describe());
  check_seq(received.size(1));
  return {received.size(0), received.size(1)};
}

namespace {
// The embedding's backward needs only the tokens.
struct EmbeddingSaved : StageContext {
  Tensor tokens;  // [B, T] (the caller's)
};
// The final norm's statistics and output, for the head's backward.
struct HeadSaved : StageContext {
  OwnedTensor rstd, h;  // [N], [N, D]
};
}  // namespace

OwnedTensor LlamaModel::input_forward(const Tensor& tokens, bool train,
                                      std::unique_ptr<StageContext>& saved) {
  const int64_t B = tokens.size(0), T = tokens.size(1), N = B * T, D = config_.dim;
  OwnedTensor x(*alloc_, {B, T, D}, dtype_, MemCategory::activation);  // [B, T, D]
  hooks_.call_needed(0, ParamPass::forward);
  Tensor x2 = x->view({N, D});
  ops::embedding_forward(tokens.view({N}), params_.param(embed_), x2);
  hooks_.call_done(0, ParamPass::forward);
  if (train) {
    auto s = std::make_unique<EmbeddingSaved>();
    s->tokens = tokens;
    saved = std::move(s);
  }
  return x;
}

void LlamaModel::input_backward(std::unique_ptr<StageContext>& saved, OwnedTensor dx,
                                TrunkContext& trunk, const GradsReady& ready) {
  (void)trunk;
  const Tensor& tokens = static_cast<EmbeddingSaved&>(*saved).tokens;
  const int64_t N = tokens.numel();
  if (params_.is_trained(embed_)) {
    Tensor d_embed = params_.grad(embed_);
    ops::embedding_backward_weight(tokens.view({N}), dx->view({N, config_.dim}), d_embed);
  }
  params_.report_trained({embed_}, ready);
  dx = OwnedTensor();
  saved.reset();
}

void LlamaModel::output_forward(const Tensor& trunk_output, bool train, HeadContext& head) {
  (void)train;
  const int64_t D = config_.dim, V = config_.vocab;
  const int64_t N = trunk_output.numel() / D;
  const Tensor x_last = trunk_output.view({N, D});
  auto s = std::make_unique<HeadSaved>();
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::forward);
  s->rstd = OwnedTensor(*alloc_, {N}, accum_dtype(dtype_), MemCategory::activation);  // [N]
  s->h = OwnedTensor(*alloc_, {N, D}, dtype_, MemCategory::activation);               // [N, D]
  ops::rmsnorm_forward(x_last, params_.param(final_norm_), config_.norm_eps, *s->h, *s->rstd);
  head.logits = OwnedTensor(*alloc_, {N, V}, dtype_, MemCategory::activation);  // [N, V]
  ops::linear_forward(*s->h, params_.param(head_), *head.logits);
  hooks_.call_done(head_site, ParamPass::forward);
  head.saved = std::move(s);
}

OwnedTensor LlamaModel::output_backward(HeadContext& head, const Tensor& trunk_output,
                                        const GradsReady& ready) {
  HeadSaved& s = static_cast<HeadSaved&>(*head.saved);
  const int64_t D = config_.dim, N = trunk_output.numel() / D;
  const Tensor x_last = trunk_output.view({N, D});
  const int head_site = site_count() - 1;
  hooks_.call_needed(head_site, ParamPass::backward);
  OwnedTensor dh(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
  ops::linear_backward_input(*head.logits, params_.param(head_), *dh);
  if (params_.is_trained(head_)) {
    Tensor d_head = params_.grad(head_);
    ops::linear_backward_weight(*head.logits, *s.h, d_head);
  }
  head.logits = OwnedTensor();
  OwnedTensor dx(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
  ops::rmsnorm_backward_input(*dh, x_last, params_.param(final_norm_), *s.rstd, *dx);
  hooks_.call_done(head_site, ParamPass::backward);
  if (params_.is_trained(final_norm_)) {
    Tensor d_final_norm = params_.grad(final_norm_);
    ops::rmsnorm_backward_weight(*dh, x_last, *s.rstd, d_final_norm);
  }
  dh = OwnedTensor();
  head.release();
  // A tied head's gradient is final only after the embedding's part.
  params_.report_trained({final_norm_, config_.tie_embeddings ? -1 : head_}, ready);
  dx.view = dx->view(trunk_output.shape());  // [B, T, D], as the stream
  return dx;
}

void LlamaModel::logits(const Tensor& tokens, Tensor& out) {
  SDP_CHECK(alloc_, "materialize() the model before logits()");
  check_whole("logits()");
  SDP_CHECK(tokens.ndim() == 2, "logits: tokens must be [batch, seq], got ", tokens.describe());
  const BatchShape shape{tokens.size(0), tokens.size(1)};
  const int64_t N = shape.tokens(), D = config_.dim, V = config_.vocab;
  expect_shape(out, {shape.batch, shape.seq, V}, "logits", "out");
  TrunkContext trunk;
  const Tensor x = evaluate_trunk(tokens, trunk).view({N, D});
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
