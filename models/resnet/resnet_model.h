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
#include <memory>
#include <optional>
#include <vector>

#include "models/common/model.h"
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
  // ones; keep_for_backward = false evaluates with the running statistics.
  double forward(const Tensor& images, const Tensor& labels, bool keep_for_backward = true) override;
  int64_t valid_targets() const override { return valid_targets_; }
  void backward(double loss_scale, bool split_weight_grads = false,
                const GradsReady& ready = {}) override;
  void backward_weight(const GradsReady& ready = {}) override;
  bool has_batch_statistics() const override { return true; }
  void recalibrate_statistics(const BatchFeed& next) override;
  // Class scores [B, num_classes] of an evaluation forward.
  void logits(const Tensor& images, Tensor& out);

  // Which blocks run here: an identity block with no channel group held is
  // skipped (the residual stream passes through).
  bool block_runs(size_t b) const;

 private:
  void declare_parameters();
  BatchNormParams declare_bn(const std::string& prefix, int64_t channels, int group);
  // The trunk: stem and blocks; returns the last block's output and, when
  // training, keeps every stage of the residual stream for backward.
  Tensor run_trunk(const Tensor& images, bool train);
  void report(const std::vector<int>& ids, const GradsReady& ready) const;
  // Drops everything a training forward kept.
  void release_saved();

  ResNetConfig config_;
  BatchNormSettings bn_;  // read by every BatchNorm (the blocks hold a reference)
  ModelLayout layout_;
  std::vector<Component> components_;
  ParameterSet params_;
  int stem_conv_ = -1, fc_weight_ = -1, fc_bias_ = -1;
  BatchNormParams stem_bn_;
  std::vector<std::unique_ptr<BasicBlock>> blocks_;
  Allocator* alloc_ = nullptr;
  DType dtype_ = DType::f32;

  struct StemSaved {
    Tensor images;                 // [B, Cin, H, W] (the caller's)
    OwnedTensor a, mean, invstd;   // conv output [B, C0, H, W]; bn stats [C0]
  };
  struct HeadSaved {
    OwnedTensor pooled;            // [B, C_last]
    OwnedTensor logits, lse;       // [B, classes] (becomes its gradient), [B]
    Tensor labels;                 // [B]
  };
  std::optional<StemSaved> stem_;
  std::optional<HeadSaved> head_;
  // The residual stream: stream_[0] the stem output, stream_[i + 1] the
  // output of the i-th block that ran; kept until backward is done with it.
  std::vector<OwnedTensor> stream_;
  std::vector<size_t> ran_;        // blocks that ran, in order
  int64_t valid_targets_ = 0;
};

}  // namespace sdp::resnet
