#pragma once
// One basic block of a CIFAR ResNet:
//   a = conv1(x) (3x3, stride s), z = relu(bn1(a)), o = conv2(z) (3x3),
//   y = relu(bn2(o) + shortcut(x)),  shortcut = bn_s(conv_s(x)) (1x1, stride
//   s) where the shape changes, else the identity.
// The inner channels (conv1's outputs = bn1's channels = conv2's inputs) are
// stored as channel groups: a group is rows of conv1, pieces of bn1 and
// columns (input channels) of conv2. The held groups run as one pack
// (models/common/packed_pieces.h): one conv1, one bn1 and one conv2 over
// their channels together, the activations [B, c, Ho, Wo] holding only
// those channels. A rank that does not hold a group (N-SDP forward
// masking) has narrower convolutions and activations; a whole block
// (B-SDP) is one group. A block whose groups
// are all absent contributes no branch: y = relu(shortcut(x)) (= x for an
// identity shortcut, whose input is already a ReLU output): the residual
// stream passes through, and a downsampling block's shared shortcut still
// changes its shape.
//
// The block is a TrunkBlock (models/common/trunk.h): the trunk owns its
// input and output (residual stream entries) and the context its forward
// saves. Backward is split like every layer: backward_input() computes the
// gradient of the block's input and, for trained parameters, the cheap
// BatchNorm weight gradients, keeping the convolutions' output gradients;
// backward_weight() computes the convolution weight gradients (+=) later or
// right away (2BP), for the trained groups' share of the pack: held but
// untrained groups (backward masking) get no weight-gradient work.
#include <optional>
#include <vector>

#include "engine/core/tensor.h"
#include "kernels/ops.h"
#include "models/common/packed_pieces.h"
#include "models/common/parameter_set.h"
#include "models/common/trunk.h"

namespace sdp::resnet {

using ops::Conv2dGeometry;

struct BatchNormParams {  // [C] each; running statistics are buffers
  int weight = -1, bias = -1, running_mean = -1, running_var = -1;
  bool held(const ParameterSet& p) const { return weight >= 0 && p.is_materialized(weight); }
};

struct ChannelGroupParams {  // c = the group's inner channels
  int conv1 = -1;            // [c, Cin, 3, 3]
  BatchNormParams bn1;       // [c]
  int conv2 = -1;            // [Cout, c, 3, 3]
};

struct BasicBlockParams {
  std::vector<ChannelGroupParams> groups;  // all groups of the model, held or not
  BatchNormParams bn2;                     // [Cout]
  int shortcut_conv = -1;                  // [Cout, Cin, 1, 1], or -1 (identity)
  BatchNormParams shortcut_bn;             // [Cout] with shortcut_conv
  // Every trainable parameter id of the block (for gradient reports).
  std::vector<int> trainable() const;
};

struct BasicBlockShape {
  int64_t in_channels = 0, out_channels = 0, stride = 1;
};

struct BatchNormSettings {
  double eps = 1e-5, momentum = 0.1;
};

class BasicBlock final : public TrunkBlock {
 public:
  // `bn` is the model's: it outlives the block, and the model may change
  // its momentum (statistics recalibration).
  BasicBlock(const BasicBlockShape& shape, const BatchNormSettings& bn, ParameterSet& params,
             int index, BasicBlockParams ids);
  const BasicBlockParams& ids() const { return ids_; }
  const BasicBlockShape& shape() const { return shape_; }
  int index() const override { return index_; }
  // Whether any channel group is held here (the branch runs) and whether any
  // of the block's own parameters (groups, bn2) gets gradients here.
  bool branch_active() const;
  bool trained() const;

  // The block runs unless it is an identity block without a held group
  // (the residual stream passes through).
  bool runs() const override;
  bool trains() const override { return trained(); }
  std::vector<int> param_ids() const override { return ids_.trainable(); }
  bool backward_reads_output() const override { return true; }  // the output ReLU

  // x [B, Cin, H, W] -> y [B, Cout, H/s, W/s]. train: BatchNorm with batch
  // statistics, moving the running ones; recompute: the same batch
  // statistics (computed again from the same input, so equal to the first
  // forward's), the running ones untouched; eval: running statistics, and
  // nothing is kept.
  Forward forward(const Tensor& x, BlockMode mode, Allocator& alloc) override;
  // dy [B, Cout, Ho, Wo] -> dx [B, Cin, H, W]; y is the block's output.
  // With keep_for_weights the convolutions' output gradients are kept
  // until backward_weight().
  OwnedTensor backward_input(BlockContext& saved, const Tensor& x, const Tensor* y,
                             OwnedTensor dy, bool keep_for_weights, Allocator& alloc) override;
  void backward_weight(BlockContext& saved, const Tensor& x, Allocator& alloc) override;

 private:
  struct PackSaved {  // one pack of held channel groups; c = their channels together
    GroupPack pack;
    OwnedTensor a;                      // conv1 output [B, c, Ho, Wo]
    OwnedTensor z;                      // relu(bn1(a)) [B, c, Ho, Wo]
    OwnedTensor mean, invstd;           // bn1 batch statistics [c]
  };
  struct Saved {
    std::vector<PackSaved> packs;
    OwnedTensor o, o_mean, o_invstd;    // conv2 output (sum of packs) [B, Cout, Ho, Wo]; bn2 stats [Cout]
    OwnedTensor s, s_mean, s_invstd;    // shortcut conv output [B, Cout, Ho, Wo]; its bn stats
  };
  struct Kept {  // output gradients of the convolutions, for backward_weight
    std::vector<OwnedTensor> da;        // conv1 of the pack [B, c, Ho, Wo], when it trains
    OwnedTensor d_o;                    // conv2 [B, Cout, Ho, Wo]
    OwnedTensor ds;                     // shortcut conv [B, Cout, Ho, Wo]
  };
  struct Context final : BlockContext {
    std::optional<Saved> saved;
    std::optional<Kept> kept;
  };
  Context& context_of(BlockContext& c) const;

  // The held channel groups as a pack (none or one), and the pack's pieces
  // of one layer (conv1, conv2) or of bn1, in its group order.
  std::vector<GroupPack> held_packs() const;
  std::vector<int> pack_ids(const GroupPack& pack, int ChannelGroupParams::*layer) const;
  std::vector<int> pack_ids(const GroupPack& pack, int BatchNormParams::*field) const;

  Conv2dGeometry conv1_geometry() const { return {3, shape_.stride, 1}; }
  Conv2dGeometry conv2_geometry() const { return {3, 1, 1}; }
  Conv2dGeometry shortcut_geometry() const { return {1, shape_.stride, 0}; }

  BasicBlockShape shape_;
  const BatchNormSettings& bn_;
  ParameterSet& params_;
  int index_;
  BasicBlockParams ids_;
};

// Shared helpers of the ResNet layers (stem, blocks): one convolution with
// its own workspace, and BatchNorm in train or eval mode.
namespace layers {
// y [B, Cout, Ho, Wo] = conv(x, w) (+= with accumulate).
void conv_forward(const Tensor& x, const Tensor& w, const Conv2dGeometry& g, Tensor& y,
                  Allocator& alloc, bool accumulate = false);
void conv_backward_input(const Tensor& dy, const Tensor& w, const Conv2dGeometry& g, Tensor& dx,
                         Allocator& alloc, bool accumulate = false);
void conv_backward_weight(const Tensor& dy, const Tensor& x, const Conv2dGeometry& g, Tensor& dw,
                          Allocator& alloc);
// Output shape of a convolution of x with w.
Shape conv_output_shape(const Shape& x, const Shape& w, const Conv2dGeometry& g);
// Training (batch statistics saved into the given [C] tensors, running
// statistics moved), recompute (the same, running statistics untouched) or
// evaluation (running statistics; mean, invstd unused).
void batchnorm(const ParameterSet& p, const BatchNormParams& bn, const BatchNormSettings& s,
               const Tensor& x, Tensor& y, BlockMode mode, Tensor* mean, Tensor* invstd);
// The same over tensors ([C] each; the running statistics move in place).
struct BatchNormTensors {
  Tensor weight, bias, running_mean, running_var;
};
void batchnorm(BatchNormTensors& bn, const BatchNormSettings& s, const Tensor& x, Tensor& y,
               BlockMode mode, Tensor* mean, Tensor* invstd);
}  // namespace layers

}  // namespace sdp::resnet
