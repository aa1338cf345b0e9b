#pragma once
// The LLaMA causal language model: embedding, decoder blocks, final RMSNorm,
// LM head (tied to the embedding or not) and the fused cross-entropy loss.
// Parameters carry Hugging Face names so a checkpoint loads in other LLaMA
// implementations. The model is cut into components (block or neuron
// granularity, models/common/component.h); a ModelLayout says which storage
// group holds each component. The default layout is one group per
// component: block granularity gives group 0 = shared (embedding, final
// norm, head) and group 1 + b = block b.
#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/block_model.h"
#include "models/common/component.h"
#include "models/common/parameter_set.h"
#include "models/llama/llama_block.h"
#include "models/llama/llama_config.h"

namespace sdp::llama {

class LlamaModel final : public BlockModel {
 public:
  explicit LlamaModel(const LlamaConfig& config, ModelLayout layout = {});
  // The components a layout cuts the model into, in model order (shared
  // first; neuron groups group-major: every block's group 0, then group 1,
  // ... so that a cyclic plan's contiguous windows give each rank the same
  // share of every layer). `params` and `group` are not filled in.
  static std::vector<Component> component_specs(const LlamaConfig& config,
                                                const ModelLayout& layout);

  const LlamaConfig& config() const { return config_; }
  const std::string& name() const override { return config_.name; }
  int64_t parameter_count() const override { return config_.parameter_count(); }
  nlohmann::json config_json() const override { return config_.to_hf_json(); }
  int64_t token_vocabulary() const override { return config_.vocab; }
  int64_t max_sequence() const override { return config_.max_seq; }
  // Next-token top-1 on evaluation forwards only (Model::evaluation_top_k).
  std::vector<int> evaluation_top_k() const override { return {1}; }
  // Storage group of block b's component (block granularity).
  int block_group(int b) const;

  // tokens, targets [B, T] i32 (targets < 0 are ignored); the protocol is
  // BlockModel's. Gradients are reported head first, then blocks from last
  // to first, then the embedding (a tied head's with the embedding's).
  // Inference forward: logits [B, T, V]; saves nothing. Whole span only.
  void logits(const Tensor& tokens, Tensor& out);

  // Pipeline stages: a stage after block 0 receives the residual stream
  // [B, T, D]. A tied embedding keeps the model whole (it is read at both
  // ends).
  void set_stage(const StageSpan& span) override;
  Shape block_input_shape(const Tensor& tokens, int block) const override;

  // Bytes forward() keeps alive until backward, for a micro-batch shape,
  // with the components held here and the recompute policy (a checkpointed
  // block keeps only its input).
  size_t saved_activation_bytes(const BatchShape& shape) const;

 private:
  // Sites: 0 the embedding, L + 1 the final norm and LM head.
  std::vector<int> input_site_params() const override { return {embed_}; }
  std::vector<int> output_site_params() const override;
  Shape check_inputs(const Tensor& tokens) const override;
  Shape check_received(const Tensor& received) const override;
  void check_seq(int64_t seq) const;
  // The RoPE tables.
  void materialize_constants() override;
  // The embedding [B, T, D]; keeps the tokens for its gradient.
  OwnedTensor input_forward(const Tensor& tokens, bool train,
                            std::unique_ptr<StageContext>& saved) override;
  void input_backward(std::unique_ptr<StageContext>& saved, OwnedTensor dx, TrunkContext& trunk,
                      const GradsReady& ready) override;
  // Final RMSNorm and LM head: logits [N, V].
  void output_forward(const Tensor& trunk_output, bool train, HeadContext& head) override;
  OwnedTensor output_backward(HeadContext& head, const Tensor& trunk_output,
                              const GradsReady& ready) override;

  void declare_parameters();

  LlamaConfig config_;
  int embed_ = -1, final_norm_ = -1, head_ = -1;
  RopeTables rope_;
  std::vector<std::unique_ptr<LlamaBlock>> blocks_;
};

}  // namespace sdp::llama
