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
#include <vector>

#include "models/common/block_model.h"
#include "models/resnet/basic_block.h"
#include "models/resnet/resnet_config.h"

namespace sdp::resnet {

class ResNetModel final : public BlockModel {
 public:
  explicit ResNetModel(const ResNetConfig& config, ModelLayout layout = {});
  static std::vector<Component> component_specs(const ResNetConfig& config,
                                                const ModelLayout& layout);

  const ResNetConfig& config() const { return config_; }
  const std::string& name() const override { return config_.name; }
  int64_t parameter_count() const override { return config_.parameter_count(); }
  nlohmann::json config_json() const override { return config_.to_json(); }
  // Top-1, and top-5 with at least 10 classes.
  std::vector<int> accuracy_top_k() const override { return classifier_top_k(config_.num_classes); }
  int64_t image_channels() const override { return config_.in_channels; }

  // images [B, C, H, W] in the model's dtype, labels [B] i32 (negative =
  // ignored); the protocol is BlockModel's. Training mode uses batch
  // statistics and updates the running ones; evaluation uses the running
  // statistics. Each pipeline stage's BatchNorms normalize with the
  // micro-batch's own statistics, as the whole model does.
  bool has_batch_statistics() const override { return true; }
  void recalibrate_statistics(const BatchFeed& next) override;
  // Class scores [B, num_classes] of an evaluation forward. Whole span only.
  void logits(const Tensor& images, Tensor& out);

  // A stage after block 0 receives its first block's input [B, C, H, W].
  Shape block_input_shape(const Tensor& images, int block) const override;

  // Which blocks run here: an identity block with no channel group held is
  // skipped (the residual stream passes through).
  bool block_runs(size_t b) const;

 private:
  // Sites: 0 the stem, L + 1 pooling and classifier.
  std::vector<int> input_site_params() const override;
  std::vector<int> output_site_params() const override { return {fc_weight_, fc_bias_}; }
  Shape check_inputs(const Tensor& images) const override;
  Shape check_received(const Tensor& received) const override;
  const char* targets_word() const override { return "labels"; }
  // The stem: conv, BatchNorm, ReLU -> block 0's input [B, C0, H, W].
  OwnedTensor input_forward(const Tensor& images, bool train,
                            std::unique_ptr<StageContext>& saved) override;
  // The stem's backward reads its output (the ReLU): the trunk keeps it.
  bool input_backward_reads_output() const override { return true; }
  void input_backward(std::unique_ptr<StageContext>& saved, OwnedTensor dx, TrunkContext& trunk,
                      const GradsReady& ready) override;
  // Global average pooling and the classifier: logits [B, classes].
  void output_forward(const Tensor& trunk_output, bool train, HeadContext& head) override;
  OwnedTensor output_backward(HeadContext& head, const Tensor& trunk_output,
                              const GradsReady& ready) override;

  void declare_parameters();
  BatchNormParams declare_bn(const std::string& prefix, int64_t channels, int group);

  ResNetConfig config_;
  BatchNormSettings bn_;  // read by every BatchNorm (the blocks hold a reference)
  int stem_conv_ = -1, fc_weight_ = -1, fc_bias_ = -1;
  BatchNormParams stem_bn_;
  std::vector<std::unique_ptr<BasicBlock>> blocks_;
};

}  // namespace sdp::resnet
