#pragma once
// A CIFAR ResNet (resnet_config.h) as a Model: stem, basic blocks, global
// average pooling, linear classifier and softmax cross-entropy, with
// parameter names as torchvision's ResNet uses them (conv1, bn1, layerS.I.*,
// layerS.I.downsample.{0,1}, fc), so a checkpoint loads into a torchvision
// resnet18 whose conv1 is replaced by a 3x3 stride-1 convolution and whose
// maxpool is removed (the usual CIFAR adaptation).
//
// Components (component.h):
//   shared   the stem (conv1, bn1), every downsampling shortcut and the
//            classifier; at neuron granularity also every block's bn2.
//            The stem and classifier are what every subnetwork starts and
//            ends with. A downsampling shortcut must exist on every rank:
//            when a rank drops the block it belongs to, the shortcut is the
//            path that still carries the residual stream to the next
//            stage's resolution and width (and it is small: 1x1). bn2
//            normalizes the sum of all channel groups' contributions, so at
//            neuron granularity no single group owns it.
//   block    (B-SDP) one basic block: conv1, bn1, conv2, bn2.
//   channel_group (N-SDP) one group of a block's inner channels: rows of
//            conv1, the matching bn1 channels (and running statistics),
//            and the matching input channels of conv2.
// BatchNorm running statistics are buffers of the ParameterSet, stored with
// the component they belong to (see Trainer for how ranks merge them).
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "models/common/model.h"
#include "models/common/trunk.h"
#include "models/resnet/basic_block.h"
#include "models/resnet/resnet_config.h"

namespace sdp::resnet {

class ResNetModel final : public Model {
 public:
  explicit ResNetModel(const ResNetConfig& config, ModelLayout layout = {});
  static std::vector<Component> component_specs(const ResNetConfig& config,
                                                const ModelLayout& layout);
  ResNetModel(const ResNetModel&) = delete;
  ResNetModel& operator=(const ResNetModel&) = delete;

  const ResNetConfig& config() const { return config_; }
  const std::string& name() const override { return config_.name; }
  int64_t parameter_count() const override { return config_.parameter_count(); }
  nlohmann::json config_json() const override { return config_.to_json(); }
  int64_t image_channels() const override { return config_.in_channels; }
  ParameterSet& params() override { return params_; }
  const ParameterSet& params() const override { return params_; }
  const std::vector<Component>& components() const override { return components_; }
  const ModelLayout& layout() const override { return layout_; }

  void materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held_groups = {},
                   const std::vector<bool>& trained_groups = {},
                   const std::vector<GroupShard>& shards = {}) override;
  Allocator& allocator() const override { return *alloc_; }
  DType dtype() const override { return dtype_; }

  // images [B, C, H, W] in the model's dtype, labels [B] i32 (negative =
  // ignored). Training mode uses batch statistics and updates the running
  // ones; keep_for_backward = false evaluates with the running statistics
  // and touches no micro-batch's state.
  double forward(const Tensor& images, const Tensor& labels, bool keep_for_backward = true,
                 int micro_batch = 0) override;
  int64_t valid_targets() const override { return valid_targets_; }
  void backward(double loss_scale, bool split_weight_grads = false, const GradsReady& ready = {},
                int micro_batch = 0) override;
  void backward_weight(const GradsReady& ready = {}, int micro_batch = 0) override;
  bool has_batch_statistics() const override { return true; }
  void recalibrate_statistics(const BatchFeed& next) override;
  // Class scores [B, num_classes] of an evaluation forward. Whole span only.
  void logits(const Tensor& images, Tensor& out);

  // Pipeline stages (model.h). A stage that starts after block 0 receives
  // its first block's input [B, C, H, W] instead of running the stem; one
  // that ends before the last block stops there and hands on its last
  // stream entry. Each stage's BatchNorms normalize with the micro-batch's
  // own statistics, as the whole model does.
  void set_stage(const StageSpan& span) override;
  const StageSpan& stage() const override { return stage_; }
  Shape stage_input_shape(const Tensor& images, int first_block) const override;
  double forward_stage(const Tensor& images, const Tensor& labels, OwnedTensor received,
                       int micro_batch) override;
  const Tensor& stage_output(int micro_batch) const override;
  // Head backward (last stage) or `output_grad`, blocks, stem (first
  // stage); returns the trunk input's gradient on a non-first stage.
  // backward() is this with the whole span.
  OwnedTensor backward_stage(OwnedTensor output_grad, double loss_scale, bool split_weight_grads,
                             const GradsReady& ready, int micro_batch) override;

  // Sites (model.h): 0 the stem, 1 + b block b, L + 1 pooling and classifier.
  int site_count() const override { return static_cast<int>(blocks_.size()) + 2; }
  std::vector<int> site_params(int site) const override;
  void set_param_hooks(ParamHooks hooks) override { hooks_ = std::move(hooks); }
  // A checkpointed block's recomputation normalizes with the same batch
  // statistics as its first forward and leaves the running ones alone.
  void set_recompute(const RecomputePolicy& policy) override { trunk_->set_recompute(policy); }
  const RecomputePolicy& recompute() const { return trunk_->recompute(); }
  size_t micro_batches_in_flight() const { return in_flight_.size(); }

  // Which blocks run here: an identity block with no channel group held is
  // skipped (the residual stream passes through).
  bool block_runs(size_t b) const;

 private:
  struct StemSaved {
    Tensor images;                 // [B, Cin, H, W] (the caller's)
    OwnedTensor a, mean, invstd;   // conv output [B, C0, H, W]; bn stats [C0]
  };
  struct HeadSaved {
    OwnedTensor pooled;            // [B, C_last]
    OwnedTensor logits, lse;       // [B, classes] (becomes its gradient), [B]
    Tensor labels;                 // [B]
  };
  // What a training forward keeps for its backward. The trunk's stream
  // entry 0 is the stem output (kept for the stem's ReLU gradient).
  struct MicroBatch {
    std::optional<StemSaved> stem;
    std::optional<HeadSaved> head;
    TrunkContext trunk;
  };

  void declare_parameters();
  BatchNormParams declare_bn(const std::string& prefix, int64_t channels, int group);
  // The trunk: stem and blocks; returns the last block's output. Training
  // keeps the stem's context and every stage of the residual stream in `m`.
  Tensor run_trunk(const Tensor& images, bool train, MicroBatch& m);
  // The stage's forward: stem (first stage) or `received` as the trunk's
  // input, the span's blocks, then head and loss (last stage). forward()
  // is this with the whole span and nothing received.
  double run_stage(const Tensor& images, const Tensor& labels, OwnedTensor received, bool train,
                   int micro_batch);
  void check_whole(const char* call) const;
  void check_site(int site) const;

  ResNetConfig config_;
  BatchNormSettings bn_;  // read by every BatchNorm (the blocks hold a reference)
  ModelLayout layout_;
  std::vector<Component> components_;
  ParameterSet params_;
  int stem_conv_ = -1, fc_weight_ = -1, fc_bias_ = -1;
  BatchNormParams stem_bn_;
  std::vector<std::unique_ptr<BasicBlock>> blocks_;
  std::unique_ptr<Trunk> trunk_;
  ParamHooks hooks_;
  Allocator* alloc_ = nullptr;
  DType dtype_ = DType::f32;

  StageSpan stage_;
  std::map<int, MicroBatch> in_flight_;
  int64_t valid_targets_ = 0;
};

}  // namespace sdp::resnet
