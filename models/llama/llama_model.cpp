#include "models/llama/llama_model.h"

#include <cmath>
#include <limits>

#include "kernels/ops.h"

namespace sdp::llama {

LlamaModel::LlamaModel(const LlamaConfig& config) : config_(config) {
  config_.validate();
  const int shared = params_.add_group("shared");
  std::vector<int> groups;
  for (int b = 0; b < config_.n_layers; ++b)
    groups.push_back(params_.add_group("block." + std::to_string(b)));
  const int64_t D = config_.dim, V = config_.vocab;
  embed_ = params_.declare("model.embed_tokens.weight", {V, D}, shared, InitKind::normal, 0.02);
  for (int b = 0; b < config_.n_layers; ++b)
    blocks_.push_back(std::make_unique<LlamaBlock>(config_, params_, b, groups[static_cast<size_t>(b)]));
  final_norm_ = params_.declare("model.norm.weight", {D}, shared, InitKind::ones);
  head_ = config_.tie_embeddings
              ? embed_
              : params_.declare("lm_head.weight", {V, D}, shared, InitKind::normal, 0.02);
}

void LlamaModel::materialize(Allocator& alloc, DType dtype, const std::vector<bool>& owned) {
  alloc_ = &alloc;
  dtype_ = dtype;
  params_.materialize(alloc, dtype, owned);
  const int64_t half = config_.head_dim() / 2;
  // The RoPE tables are constants of the model, not parameters.
  rope_cos_ = OwnedTensor(alloc, {config_.max_seq, half}, dtype, MemCategory::workspace);
  rope_sin_ = OwnedTensor(alloc, {config_.max_seq, half}, dtype, MemCategory::workspace);
  ops::rope_tables(config_.rope_theta, *rope_cos_, *rope_sin_);
}

OwnedTensor LlamaModel::run_trunk(const Tensor& tokens, const BatchShape& shape, bool save) {
  const int64_t N = shape.tokens(), D = config_.dim;
  OwnedTensor x(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
  ops::embedding_forward(tokens.view({N}), params_.param(embed_), *x);  // x: [N, D]
  for (auto& block : blocks_) {
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
  h.rstd = OwnedTensor(*alloc_, {N}, dtype_, MemCategory::activation);       // [N]
  h.h = OwnedTensor(*alloc_, {N, D}, dtype_, MemCategory::activation);       // [N, D]
  ops::rmsnorm_forward(*h.x_last, params_.param(final_norm_), config_.norm_eps, *h.h, *h.rstd);
  h.logits = OwnedTensor(*alloc_, {N, V}, dtype_, MemCategory::activation);  // [N, V]
  ops::linear_forward(*h.h, params_.param(head_), *h.logits);
  h.lse = OwnedTensor(*alloc_, {N}, dtype_, MemCategory::activation);        // [N]
  OwnedTensor losses(*alloc_, {N}, dtype_, MemCategory::workspace);          // [N]
  ops::cross_entropy_forward(*h.logits, targets.view({N}), *losses, *h.lse);

  double total = 0;
  valid_targets_ = 0;
  if (tokens.device() == Device::meta) {
    total = std::numeric_limits<double>::quiet_NaN();
    valid_targets_ = N;
  } else {
    const int32_t* t = targets.data<int32_t>();
    for (int64_t i = 0; i < N; ++i) valid_targets_ += t[i] >= 0;
    // sum_squares would lose the sign; the losses are read back directly.
    for (int64_t i = 0; i < N; ++i) total += ops::item(*losses, i);
  }
  if (keep_for_backward) head_ctx_ = std::move(h);
  return total;
}

void LlamaModel::backward(double loss_scale, bool split_weight_grads) {
  SDP_CHECK(head_ctx_, "backward() without a preceding forward()");
  SDP_CHECK(params_.has_grads(), "backward() needs allocated gradients (allocate_grads())");
  HeadContext& h = *head_ctx_;
  const int64_t N = h.shape.tokens(), D = config_.dim;

  // The logits' storage becomes their gradient: no second [N, V] buffer.
  ops::cross_entropy_backward_input(*h.logits, h.targets.view({N}), *h.lse, loss_scale, *h.logits);
  const bool head_owned = params_.is_materialized(head_);
  OwnedTensor dh(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
  ops::linear_backward_input(*h.logits, params_.param(head_), *dh);
  if (head_owned) {
    Tensor d_head = params_.grad(head_);
    ops::linear_backward_weight(*h.logits, *h.h, d_head);
  }
  h.logits = OwnedTensor();
  OwnedTensor dx(*alloc_, {N, D}, dtype_, MemCategory::activation);  // [N, D]
  ops::rmsnorm_backward_input(*dh, *h.x_last, params_.param(final_norm_), *h.rstd, *dx);
  Tensor d_final_norm = params_.grad(final_norm_);
  ops::rmsnorm_backward_weight(*dh, *h.x_last, *h.rstd, d_final_norm);
  dh = OwnedTensor();
  const Tensor tokens = h.tokens;
  head_ctx_.reset();

  for (size_t i = blocks_.size(); i-- > 0;) {
    const bool owned = params_.group_decl(block_group(static_cast<int>(i))).materialized;
    dx = blocks_[i]->backward_input(std::move(dx), *rope_cos_, *rope_sin_, owned, *alloc_);
    if (owned && !split_weight_grads) blocks_[i]->backward_weight();
  }
  Tensor d_embed = params_.grad(embed_);
  ops::embedding_backward_weight(tokens.view({N}), *dx, d_embed);
}

void LlamaModel::backward_weight() {
  for (size_t i = blocks_.size(); i-- > 0;)
    if (params_.group_decl(block_group(static_cast<int>(i))).materialized)
      blocks_[i]->backward_weight();
}

void LlamaModel::logits(const Tensor& tokens, Tensor& out) {
  SDP_CHECK(alloc_, "materialize() the model before logits()");
  SDP_CHECK(tokens.ndim() == 2, "logits: tokens must be [batch, seq], got ", tokens.describe());
  const BatchShape shape{tokens.size(0), tokens.size(1)};
  const int64_t N = shape.tokens(), D = config_.dim, V = config_.vocab;
  expect_shape(out, {shape.batch, shape.seq, V}, "logits", "out");
  OwnedTensor x = run_trunk(tokens, shape, false);
  OwnedTensor rstd(*alloc_, {N}, dtype_, MemCategory::workspace);     // [N]
  OwnedTensor h(*alloc_, {N, D}, dtype_, MemCategory::workspace);     // [N, D]
  ops::rmsnorm_forward(*x, params_.param(final_norm_), config_.norm_eps, *h, *rstd);
  Tensor out2 = out.view({N, V});
  ops::linear_forward(*h, params_.param(head_), out2);
}

std::vector<Component> LlamaModel::components(Granularity granularity, int ffn_groups,
                                              int head_groups) const {
  std::vector<Component> out;
  auto whole = [&](int id) { return ParamSlice{id, 0, 0, -1}; };
  Component shared{"shared", ComponentKind::shared, -1, {}, 0};
  shared.slices.push_back(whole(embed_));
  shared.slices.push_back(whole(final_norm_));
  if (head_ != embed_) shared.slices.push_back(whole(head_));
  const int64_t F = config_.ffn_dim, Hkv = config_.n_kv_heads;
  const int64_t group_q = config_.n_heads / Hkv, Dh = config_.head_dim();
  if (granularity == Granularity::neuron) {
    SDP_CHECK(ffn_groups >= 1 && F % ffn_groups == 0, "ffn_groups = ", ffn_groups,
              " must divide the FFN size ", F);
    SDP_CHECK(head_groups >= 1 && Hkv % head_groups == 0, "head_groups = ", head_groups,
              " must divide the number of KV heads ", Hkv);
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const BlockParams& p = blocks_[b]->ids();
    const std::string name = "block." + std::to_string(b);
    if (granularity == Granularity::block) {
      Component c{name, ComponentKind::block, static_cast<int>(b), {}, 0};
      for (int id : {p.norm1, p.wq, p.wk, p.wv, p.wo, p.norm2, p.wgate, p.wup, p.wdown})
        c.slices.push_back(whole(id));
      out.push_back(std::move(c));
      continue;
    }
    // The norms are read by every neuron group of the block: shared.
    shared.slices.push_back(whole(p.norm1));
    shared.slices.push_back(whole(p.norm2));
    const int64_t fw = F / ffn_groups;
    for (int g = 0; g < ffn_groups; ++g) {
      Component c{name + ".ffn." + std::to_string(g), ComponentKind::ffn_group,
                  static_cast<int>(b), {}, 0};
      c.slices = {{p.wgate, 0, g * fw, fw}, {p.wup, 0, g * fw, fw}, {p.wdown, 1, g * fw, fw}};
      out.push_back(std::move(c));
    }
    const int64_t kv_per = Hkv / head_groups;  // KV heads per group
    for (int g = 0; g < head_groups; ++g) {
      Component c{name + ".heads." + std::to_string(g), ComponentKind::head_group,
                  static_cast<int>(b), {}, 0};
      const int64_t q_rows = kv_per * group_q * Dh, kv_rows = kv_per * Dh;
      c.slices = {{p.wq, 0, g * q_rows, q_rows},
                  {p.wk, 0, g * kv_rows, kv_rows},
                  {p.wv, 0, g * kv_rows, kv_rows},
                  {p.wo, 1, g * q_rows, q_rows}};
      out.push_back(std::move(c));
    }
  }
  out.insert(out.begin(), std::move(shared));
  for (Component& c : out)
    for (ParamSlice& s : c.slices) {
      const Shape& shape = params_.decl(s.param).shape;
      if (s.length < 0) {
        c.numel += shape.numel();
      } else {
        const int64_t other = shape.numel() / shape[s.axis];
        c.numel += s.length * other;
      }
    }
  return out;
}

size_t LlamaModel::saved_activation_bytes(const BatchShape& shape) const {
  SDP_CHECK(alloc_, "materialize() the model before planning activations");
  const int64_t N = shape.tokens();
  const size_t e = dtype_size(dtype_);
  auto bytes = [&](int64_t numel) { return alloc_->rounded(static_cast<size_t>(numel) * e); };
  size_t total = 0;
  for (size_t b = 0; b < blocks_.size(); ++b)
    total += LlamaBlock::saved_activation_bytes(config_, shape, dtype_, *alloc_);
  // Last block output, final norm (rstd, h), logits, lse.
  total += 2 * bytes(N * config_.dim) + 2 * bytes(N) + bytes(N * config_.vocab);
  return total;
}

}  // namespace sdp::llama
