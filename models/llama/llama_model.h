#pragma once
// The LLaMA causal language model: embedding, decoder blocks, final RMSNorm,
// LM head (tied to the embedding or not) and the fused cross-entropy loss.
// Parameters carry Hugging Face names so a checkpoint loads in other LLaMA
// implementations. The model is cut into components (block or neuron
// granularity, models/common/component.h); a ModelLayout says which storage
// group holds each component. The default layout is one group per
// component: block granularity gives group 0 = shared (embedding, final
// norm, head) and group 1 + b = block b.
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/component.h"
#include "models/common/model.h"
#include "models/common/parameter_set.h"
#include "models/llama/llama_block.h"
#include "models/llama/llama_config.h"

namespace sdp::llama {

using GradsReady = sdp::GradsReady;

class LlamaModel final : public Model {
 public:
  explicit LlamaModel(const LlamaConfig& config, ModelLayout layout = {});
  // The components a layout cuts the model into, in model order (shared
  // first; neuron groups group-major: every block's group 0, then group 1,
  // ... so that a cyclic plan's contiguous windows give each rank the same
  // share of every layer). `params` and `group` are not filled in.
  static std::vector<Component> component_specs(const LlamaConfig& config,
                                                const ModelLayout& layout);
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  const LlamaConfig& config() const { return config_; }
  const std::string& name() const override { return config_.name; }
  int64_t parameter_count() const override { return config_.parameter_count(); }
  nlohmann::json config_json() const override { return config_.to_hf_json(); }
  ParameterSet& params() override { return params_; }
  const ParameterSet& params() const override { return params_; }

  // Allocates the parameters of the held storage groups (all when empty),
  // keeps gradients for the trained ones (default = held; see
  // ParameterSet::materialize), and the RoPE tables, on `alloc`, which also
  // serves every activation later.
  void materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held_groups = {},
                   const std::vector<bool>& trained_groups = {},
                   const std::vector<GroupShard>& shards = {}) override;
  Allocator& allocator() const override { return *alloc_; }
  DType dtype() const override { return dtype_; }
  const ModelLayout& layout() const override { return layout_; }
  // Components with their parameters and storage groups.
  const std::vector<Component>& components() const override { return components_; }
  // Storage group of block b's component (block granularity).
  int block_group(int b) const;

  // Forward of one micro-batch, keeping activations for backward.
  // tokens, targets [B, T] i32 (targets < 0 are ignored). Returns the summed
  // loss over valid targets (NaN on meta) and sets valid_targets().
  // With keep_for_backward = false (evaluation) each block's activations are
  // freed as soon as the next block has consumed them.
  double forward(const Tensor& tokens, const Tensor& targets,
                 bool keep_for_backward = true) override;
  int64_t valid_targets() const override { return valid_targets_; }
  // Backward of the last forward. loss_scale multiplies each token's loss
  // (e.g. 1 / tokens in the global batch). Weight gradients of the trained
  // parameters accumulate into params().grad(); held but untrained ones
  // (backward masking) get none, and no work is spent on them. With
  // split_weight_grads, blocks keep what they need and the caller runs
  // backward_weight() later (2BP). `ready`, when set, hears of every
  // trained parameter once its gradient is final, in the order backward
  // finishes them (head, then blocks from last to first, then embedding).
  void backward(double loss_scale, bool split_weight_grads = false,
                const GradsReady& ready = {}) override;
  // Deferred weight gradients of every block still holding them.
  void backward_weight(const GradsReady& ready = {}) override;
  // Inference forward: logits [B, T, V]; saves nothing.
  void logits(const Tensor& tokens, Tensor& out);

  // Bytes forward() keeps alive until backward, for a micro-batch shape,
  // with the components held here.
  size_t saved_activation_bytes(const BatchShape& shape) const;

 private:
  OwnedTensor run_trunk(const Tensor& tokens, const BatchShape& shape, bool save);

  void declare_parameters();

  LlamaConfig config_;
  ModelLayout layout_;
  std::vector<Component> components_;
  ParameterSet params_;
  int embed_ = -1, final_norm_ = -1, head_ = -1;
  std::vector<std::unique_ptr<LlamaBlock>> blocks_;
  Allocator* alloc_ = nullptr;
  DType dtype_ = DType::f32;
  OwnedTensor rope_cos_, rope_sin_;  // [max_seq, Dh/2]

  struct HeadContext {  // saved by forward for the loss backward
    BatchShape shape;
    Tensor tokens, targets;
    OwnedTensor x_last, rstd, h, logits, lse;
  };
  std::optional<HeadContext> head_ctx_;
  int64_t valid_targets_ = 0;
};

}  // namespace sdp::llama
