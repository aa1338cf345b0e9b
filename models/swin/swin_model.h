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

#include "models/common/block_model.h"
#include "models/swin/swin_block.h"
#include "models/swin/swin_config.h"

namespace sdp::swin {

class SwinModel final : public BlockModel {
 public:
  explicit SwinModel(const SwinConfig& config, ModelLayout layout = {});
  static std::vector<Component> component_specs(const SwinConfig& config,
                                                const ModelLayout& layout);

  const SwinConfig& config() const { return config_; }
  const std::string& name() const override { return config_.name; }
  int64_t parameter_count() const override { return config_.parameter_count(); }
  nlohmann::json config_json() const override { return config_.to_json(); }
  // Top-1, and top-5 with at least 10 classes.
  std::vector<int> accuracy_top_k() const override { return classifier_top_k(config_.num_classes); }
  int64_t image_channels() const override { return config_.in_chans; }
  int64_t image_side() const override { return config_.img_size; }

  // images [B, in_chans, img, img] in the model's dtype, labels [B] i32
  // (negative = ignored); the protocol is BlockModel's.
  // Class scores [B, num_classes] of an evaluation forward. Whole span only.
  void logits(const Tensor& images, Tensor& out);

  // Stochastic depth (model.h).
  bool has_stochastic_depth() const override { return true; }
  double drop_path() const override { return config_.drop_path_rate; }
  void set_drop_path(double rate) override;
  void set_sample_key(const SampleKey& key) override { sample_key_ = key; }

  // Block b reads [B, R, R, C] (before its merging); a stage after block 0
  // receives that of its first block.
  Shape block_input_shape(const Tensor& images, int block) const override;

  bool block_runs(size_t b) const { return blocks_[b]->runs(); }
  const SwinBlock& block(size_t b) const { return *blocks_[b]; }

 private:
  // Sites: 0 the patch embedding, 1 + b block b (with its merging), L + 1
  // final norm and head.
  std::vector<int> input_site_params() const override;
  std::vector<int> output_site_params() const override;
  Shape check_inputs(const Tensor& images) const override;
  Shape check_received(const Tensor& received) const override;
  const char* targets_word() const override { return "labels"; }
  // The window constants (timm's non-persistent buffers).
  void materialize_constants() override;
  // The patch embedding: patchify, linear, LayerNorm -> [B, R0, R0, D].
  OwnedTensor input_forward(const Tensor& images, bool train,
                            std::unique_ptr<StageContext>& saved) override;
  void input_backward(std::unique_ptr<StageContext>& saved, OwnedTensor dx, TrunkContext& trunk,
                      const GradsReady& ready) override;
  // Final norm, the mean over tokens and the head: logits [B, classes].
  void output_forward(const Tensor& trunk_output, bool train, HeadContext& head) override;
  // The head's backward reads only its own tensors and the trunk output.
  void trim_head(HeadContext& head) override;
  OwnedTensor output_backward(HeadContext& head, const Tensor& trunk_output,
                              const GradsReady& ready) override;
  // The samples a micro-batch drops: drawn at its training forward, the
  // same again for a checkpointed block's recomputation in its backward.
  void enter_trunk(int micro_batch, bool train, bool backward) override;
  void leave_trunk() override { current_key_ = DropPathKey(); }

  void declare_parameters();
  DropPathKey key_for(int micro_batch, bool train) const;

  SwinConfig config_;
  int embed_weight_ = -1, embed_bias_ = -1, embed_norm_weight_ = -1, embed_norm_bias_ = -1;
  int norm_weight_ = -1, norm_bias_ = -1, head_weight_ = -1, head_bias_ = -1;
  std::vector<SwinBlockShape> shapes_;
  std::vector<std::unique_ptr<WindowConstants>> constants_;  // per block
  std::vector<std::unique_ptr<SwinBlock>> blocks_;

  std::optional<SampleKey> sample_key_;
  std::map<int, DropPathKey> keys_;  // per micro-batch in flight, from its training forward
  DropPathKey current_key_;  // what the blocks read while a forward (or recompute) runs
};

}  // namespace sdp::swin
