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
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/component.h"
#include "models/common/model.h"
#include "models/common/parameter_set.h"
#include "models/common/trunk.h"
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

  // Forward of one micro-batch, keeping activations for backward (under
  // `micro_batch`, model.h). tokens, targets [B, T] i32 (targets < 0 are
  // ignored). Returns the summed loss over valid targets (NaN on meta) and
  // sets valid_targets(). With keep_for_backward = false (evaluation) each
  // block's activations are freed as soon as the next block has consumed
  // them, and no micro-batch's state is touched.
  double forward(const Tensor& tokens, const Tensor& targets, bool keep_for_backward = true,
                 int micro_batch = 0) override;
  int64_t valid_targets() const override { return valid_targets_; }
  // Backward of micro-batch `micro_batch`'s forward. loss_scale multiplies
  // each token's loss (e.g. 1 / tokens in the global batch). Weight
  // gradients of the trained parameters accumulate into params().grad();
  // held but untrained ones (backward masking) get none, and no work is
  // spent on them. With split_weight_grads, blocks keep what they need and
  // the caller runs backward_weight() later (2BP). `ready`, when set,
  // hears of every trained parameter once its gradient is final, in the
  // order backward finishes them (head, then blocks from last to first,
  // then embedding).
  void backward(double loss_scale, bool split_weight_grads = false, const GradsReady& ready = {},
                int micro_batch = 0) override;
  // Deferred weight gradients of every block still holding them.
  void backward_weight(const GradsReady& ready = {}, int micro_batch = 0) override;
  // Inference forward: logits [B, T, V]; saves nothing. Whole span only.
  void logits(const Tensor& tokens, Tensor& out);

  // Pipeline stages (model.h). A stage that starts after block 0 receives
  // the residual stream [B, T, D] instead of embedding tokens; one that
  // ends before the last block stops there and hands on its last stream
  // entry. A tied embedding keeps the model whole (it is read at both ends).
  void set_stage(const StageSpan& span) override;
  const StageSpan& stage() const override { return stage_; }
  Shape stage_input_shape(const Tensor& tokens, int first_block) const override;
  double forward_stage(const Tensor& tokens, const Tensor& targets, OwnedTensor received,
                       int micro_batch) override;
  const Tensor& stage_output(int micro_batch) const override;
  // Head backward (last stage) or `output_grad`, blocks, embedding gradient
  // (first stage); returns the trunk input's gradient on a non-first stage.
  // backward() is this with the whole span.
  OwnedTensor backward_stage(OwnedTensor output_grad, double loss_scale, bool split_weight_grads,
                             const GradsReady& ready, int micro_batch) override;

  // Sites (model.h): 0 embedding, 1 + b block b, L + 1 final norm and head.
  int site_count() const override { return config_.n_layers + 2; }
  std::vector<int> site_params(int site) const override;
  void set_param_hooks(ParamHooks hooks) override { hooks_ = std::move(hooks); }
  void set_recompute(const RecomputePolicy& policy) override { trunk_->set_recompute(policy); }
  const RecomputePolicy& recompute() const { return trunk_->recompute(); }
  // Micro-batches whose training forward is kept (until their backward).
  size_t micro_batches_in_flight() const { return in_flight_.size(); }

  // Bytes forward() keeps alive until backward, for a micro-batch shape,
  // with the components held here and the recompute policy (a checkpointed
  // block keeps only its input).
  size_t saved_activation_bytes(const BatchShape& shape) const;

 private:
  struct HeadContext {  // saved by forward for the loss backward
    BatchShape shape;
    Tensor tokens, targets;
    Tensor x_last;                       // [N, D], the trunk's output entry
    OwnedTensor rstd, h, logits, lse;
  };
  struct MicroBatch {
    TrunkContext trunk;
    std::optional<HeadContext> head;
    Tensor tokens;                       // [B, T], for the embedding gradient
  };

  // Embedding and blocks (through the trunk); returns the trunk's output
  // [N, D] (a view of its last stream entry).
  Tensor run_trunk(const Tensor& tokens, const BatchShape& shape, bool train, TrunkContext& trunk);
  // The stage's forward: embedding (first stage) or `received` as the
  // trunk's input, the span's blocks, then head and loss (last stage).
  // forward() is this with the whole span and nothing received.
  double run_stage(const Tensor& tokens, const Tensor& targets, OwnedTensor received, bool train,
                   int micro_batch);
  void check_whole(const char* call) const;
  void check_site(int site) const;

  void declare_parameters();

  LlamaConfig config_;
  ModelLayout layout_;
  std::vector<Component> components_;
  ParameterSet params_;
  int embed_ = -1, final_norm_ = -1, head_ = -1;
  RopeTables rope_;
  std::vector<std::unique_ptr<LlamaBlock>> blocks_;
  std::unique_ptr<Trunk> trunk_;
  ParamHooks hooks_;
  Allocator* alloc_ = nullptr;
  DType dtype_ = DType::f32;

  StageSpan stage_;
  std::map<int, MicroBatch> in_flight_;
  int64_t valid_targets_ = 0;
};

}  // namespace sdp::llama
