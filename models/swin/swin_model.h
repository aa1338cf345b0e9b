#pragma once
// A Swin Transformer (swin_config.h) as a Model: patch embedding, the
// shifted-window blocks (swin_block.h, with each stage's patch merging in
// its first block), final LayerNorm, the mean over tokens, a linear head and
// softmax cross-entropy. Parameter names are timm's SwinTransformer
// state_dict names (patch_embed.proj, patch_embed.norm,
// layers.{i}.downsample.{norm,reduction}, layers.{i}.blocks.{j}.*, norm,
// head.fc), so a checkpoint loads into timm 1.0.9 with strict=True (its
// relative_position_index and attn_mask buffers are not persistent; here
// they are model constants, rebuilt at materialize()).
//
// Components (component.h):
//   shared   the patch embedding, every patch merging, the final norm and
//            the head; at neuron granularity also each block's norm1,
//            norm2, proj.bias and fc2.bias (read or written by every group).
//            A patch merging stays with every rank (as a ResNet's
//            downsampling shortcut does): it carries the stream to the next
//            stage's resolution and width when the block it starts is
//            dropped.
//   block    (B-SDP) one Swin block (without its merging).
//   head_group (N-SDP) heads of one block: their q, k, v rows of qkv and
//            bias, the bias table's columns, proj.weight's input columns.
//   ffn_group  (N-SDP) MLP units of one block: fc1 rows and bias, fc2 columns.
//
// Stochastic depth (drop path): per block rate as timm's schedule, for the
// rate set_drop_path() gives (the config's drop_path_rate by default).
// Samples are drawn from set_sample_key(), so any world size drops the
// same global samples; a block this rank does not run is identity
// (structurally dropped) and draws nothing.
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "models/common/model.h"
#include "models/common/trunk.h"
#include "models/swin/swin_block.h"
#include "models/swin/swin_config.h"

namespace sdp::swin {

class SwinModel final : public Model {
 public:
  explicit SwinModel(const SwinConfig& config, ModelLayout layout = {});
  static std::vector<Component> component_specs(const SwinConfig& config,
                                                const ModelLayout& layout);
  SwinModel(const SwinModel&) = delete;
  SwinModel& operator=(const SwinModel&) = delete;

  const SwinConfig& config() const { return config_; }
  const std::string& name() const override { return config_.name; }
  int64_t parameter_count() const override { return config_.parameter_count(); }
  nlohmann::json config_json() const override { return config_.to_json(); }
  int64_t image_channels() const override { return config_.in_chans; }
  int64_t image_side() const override { return config_.img_size; }
  ParameterSet& params() override { return params_; }
  const ParameterSet& params() const override { return params_; }
  const std::vector<Component>& components() const override { return components_; }
  const ModelLayout& layout() const override { return layout_; }

  void materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held_groups = {},
                   const std::vector<bool>& trained_groups = {},
                   const std::vector<GroupShard>& shards = {}) override;
  Allocator& allocator() const override { return *alloc_; }
  DType dtype() const override { return dtype_; }

  // images [B, in_chans, img, img] in the model's dtype, labels [B] i32
  // (negative = ignored).
  double forward(const Tensor& images, const Tensor& labels, bool keep_for_backward = true,
                 int micro_batch = 0) override;
  int64_t valid_targets() const override { return valid_targets_; }
  void backward(double loss_scale, bool split_weight_grads = false, const GradsReady& ready = {},
                int micro_batch = 0) override;
  void backward_weight(const GradsReady& ready = {}, int micro_batch = 0) override;
  // Class scores [B, num_classes] of an evaluation forward. Whole span only.
  void logits(const Tensor& images, Tensor& out);

  // Stochastic depth (model.h).
  bool has_stochastic_depth() const override { return true; }
  double drop_path() const override { return config_.drop_path_rate; }
  void set_drop_path(double rate) override;
  void set_sample_key(const SampleKey& key) override { sample_key_ = key; }

  // Pipeline stages (model.h): a stage after block 0 receives its first
  // block's input [B, R, R, C] (before that block's merging).
  void set_stage(const StageSpan& span) override;
  const StageSpan& stage() const override { return stage_; }
  Shape stage_input_shape(const Tensor& images, int first_block) const override;
  double forward_stage(const Tensor& images, const Tensor& labels, OwnedTensor received,
                       int micro_batch) override;
  const Tensor& stage_output(int micro_batch) const override;
  OwnedTensor backward_stage(OwnedTensor output_grad, double loss_scale, bool split_weight_grads,
                             const GradsReady& ready, int micro_batch) override;

  // Sites (model.h): 0 the patch embedding, 1 + b block b (with its
  // merging), L + 1 final norm and head.
  int site_count() const override { return static_cast<int>(blocks_.size()) + 2; }
  std::vector<int> site_params(int site) const override;
  void set_param_hooks(ParamHooks hooks) override { hooks_ = std::move(hooks); }
  void set_recompute(const RecomputePolicy& policy) override { trunk_->set_recompute(policy); }
  const RecomputePolicy& recompute() const { return trunk_->recompute(); }
  size_t micro_batches_in_flight() const { return in_flight_.size(); }
  bool block_runs(size_t b) const { return blocks_[b]->runs(); }
  const SwinBlock& block(size_t b) const { return *blocks_[b]; }

 private:
  struct EmbedSaved {
    OwnedTensor patches;     // [B, R0, R0, C p p]
    OwnedTensor e;           // [B, R0, R0, D] before the norm
    OwnedTensor mean, rstd;  // [B, R0, R0]
  };
  struct HeadSaved {
    OwnedTensor mean, rstd;   // [B, R, R] final norm statistics
    OwnedTensor normed;       // [B, R, R, C]
    OwnedTensor pooled;       // [B, C]
    OwnedTensor logits, lse;  // [B, classes] (becomes its gradient), [B]
    Tensor labels;            // [B]
  };
  struct MicroBatch {
    std::optional<EmbedSaved> embed;
    std::optional<HeadSaved> head;
    DropPathKey key;
    TrunkContext trunk;
  };

  void declare_parameters();
  void build_constants();
  OwnedTensor embed(const Tensor& images, EmbedSaved* saved);
  // Final norm, pooling and head: the logits [B, classes] of `last`.
  void head_forward(const Tensor& last, HeadSaved& h, bool keep);
  double run_stage(const Tensor& images, const Tensor& labels, OwnedTensor received, bool train,
                   int micro_batch);
  DropPathKey key_for(int micro_batch, bool train) const;
  void check_whole(const char* call) const;
  void check_site(int site) const;

  SwinConfig config_;
  ModelLayout layout_;
  std::vector<Component> components_;
  ParameterSet params_;
  int embed_weight_ = -1, embed_bias_ = -1, embed_norm_weight_ = -1, embed_norm_bias_ = -1;
  int norm_weight_ = -1, norm_bias_ = -1, head_weight_ = -1, head_bias_ = -1;
  std::vector<SwinBlockShape> shapes_;
  std::vector<std::unique_ptr<WindowConstants>> constants_;  // per block
  std::vector<std::unique_ptr<SwinBlock>> blocks_;
  std::unique_ptr<Trunk> trunk_;
  ParamHooks hooks_;
  Allocator* alloc_ = nullptr;
  DType dtype_ = DType::f32;

  std::optional<SampleKey> sample_key_;
  DropPathKey current_key_;  // what the blocks read while a forward (or recompute) runs
  StageSpan stage_;
  std::map<int, MicroBatch> in_flight_;
  int64_t valid_targets_ = 0;
};

}  // namespace sdp::swin
