#pragma once
// The LLaMA causal language model: embedding, decoder blocks, final RMSNorm,
// LM head (tied to the embedding or not) and the fused cross-entropy loss.
// Parameters carry Hugging Face names so a checkpoint loads in other LLaMA
// implementations. Parameter groups: group 0 = shared (embedding, final norm,
// head), group 1 + b = block b.
#include <memory>
#include <optional>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/component.h"
#include "models/common/parameter_set.h"
#include "models/llama/llama_block.h"
#include "models/llama/llama_config.h"

namespace sdp::llama {

class LlamaModel {
 public:
  explicit LlamaModel(const LlamaConfig& config);
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  const LlamaConfig& config() const { return config_; }
  ParameterSet& params() { return params_; }
  const ParameterSet& params() const { return params_; }

  // Allocates parameters (all groups, or those with owned[g] == true) and the
  // RoPE tables on `alloc`, which also serves every activation later.
  void materialize(Allocator& alloc, DType dtype, const std::vector<bool>& owned_groups = {});
  Allocator& allocator() const { return *alloc_; }
  DType dtype() const { return dtype_; }
  int shared_group() const { return 0; }
  int block_group(int b) const { return 1 + b; }

  // Forward of one micro-batch, keeping activations for backward.
  // tokens, targets [B, T] i32 (targets < 0 are ignored). Returns the summed
  // loss over valid targets (NaN on meta) and sets valid_targets().
  // With keep_for_backward = false (evaluation) each block's activations are
  // freed as soon as the next block has consumed them.
  double forward(const Tensor& tokens, const Tensor& targets, bool keep_for_backward = true);
  int64_t valid_targets() const { return valid_targets_; }
  // Backward of the last forward. loss_scale multiplies each token's loss
  // (e.g. 1 / tokens in the global batch). Weight gradients accumulate into
  // params().grad(); with split_weight_grads, blocks keep what they need and
  // the caller runs backward_weight() later (2BP). Blocks whose group is not
  // in `weight_grad_groups` (when given) get no weight gradients at all.
  void backward(double loss_scale, bool split_weight_grads = false);
  // Deferred weight gradients of every block still holding them.
  void backward_weight();
  // Inference forward: logits [B, T, V]; saves nothing.
  void logits(const Tensor& tokens, Tensor& out);

  // Components at block or neuron granularity (see models/common/component.h).
  // Neuron granularity splits each block's FFN into `ffn_groups` groups of
  // hidden units and its attention into `head_groups` groups of KV heads
  // (with their query heads); the block's two norm weights stay shared.
  std::vector<Component> components(Granularity granularity, int ffn_groups = 4,
                                    int head_groups = 4) const;

  // Bytes forward() keeps alive until backward, for a micro-batch shape.
  size_t saved_activation_bytes(const BatchShape& shape) const;

 private:
  OwnedTensor run_trunk(const Tensor& tokens, const BatchShape& shape, bool save);

  LlamaConfig config_;
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
