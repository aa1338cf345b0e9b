#pragma once
// One shifted-window Swin block (timm's SwinTransformerBlock), preceded by
// the stage's patch merging when it is a stage's first block (i > 0):
//   z = merge(x) (or x); h1 = LayerNorm1(z)
//   m = z + d1 * merge_windows(proj(WindowAttention(partition(h1))))
//   y = m + d2 * fc2(GELU(fc1(LayerNorm2(m))))
// with d1, d2 the per-sample stochastic depth factors (0, or 1 / (1 - p)),
// partition / merge the (shifted) window index maps, and the relative
// position bias and shifted windows' mask of timm.
//
// The attention is stored as head groups (rows of qkv for the group's q, k
// and v heads, their bias, the bias table's columns, proj's input columns)
// and the MLP as unit groups (fc1 rows and bias, fc2 columns); a whole
// block (B-SDP) is one of each. The block sums the held groups'
// contributions, so a rank without a group (N-SDP forward masking) simply
// has narrower matrices. What every group reads or writes (norm1, norm2,
// proj.bias, fc2.bias, the merging) is shared at neuron granularity; with
// no group held, a branch is its bias alone.
//
// Stochastic depth applies only inside blocks that run: a B-SDP block a
// rank does not hold is already structurally dropped (identity), and its
// drop factors are never drawn. Factors are a counter-based function of
// (seed, step, block, branch, global sample index) (DropPathKey), so a
// distributed run drops exactly the samples the single-process run drops,
// and a recomputed forward draws the same ones.
//
// Backward is split like the other blocks (trunk.h): backward_input keeps
// the output gradients the trained parameters need, backward_weight
// accumulates their gradients. The bias table's gradient comes out of the
// attention's input gradient (ops.h) and is accumulated there.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/parameter_set.h"
#include "models/common/trunk.h"
#include "models/swin/patch_merging.h"

namespace sdp::swin {

struct SwinBlockShape {
  int64_t in_dim = 0;      // channels of the block's input (half of dim when merging)
  int64_t dim = 0;         // C
  int64_t resolution = 0;  // R: tokens per side after any merging
  int64_t window = 0, shift = 0;
  int64_t heads = 0, head_dim = 0, hidden = 0;
  bool merge = false;
  double eps = 1e-5;
  int64_t tokens_per_window() const { return window * window; }
};

struct HeadGroupParams {
  // qkv rows of the group: one whole [3C, C] tensor (block granularity) or
  // three pieces (q, k, v rows of the group's heads) declared one after
  // another in one storage group, so that they are contiguous: together a
  // [3 hg Dh, C] matrix in timm's (3, heads, Dh) row order.
  std::vector<int> qkv_weight, qkv_bias;
  int table = -1;  // [R, hg] relative position bias table columns
  int proj = -1;   // [C, hg Dh] proj.weight columns
};
struct MlpGroupParams {
  int fc1_weight = -1, fc1_bias = -1;  // [units, C], [units]
  int fc2_weight = -1;                 // [C, units]
};
struct SwinBlockParams {
  int norm1_weight = -1, norm1_bias = -1, norm2_weight = -1, norm2_bias = -1;  // [C]
  int proj_bias = -1, fc2_bias = -1;                                           // [C]
  std::vector<HeadGroupParams> heads;  // all groups of the model, held or not
  std::vector<MlpGroupParams> mlp;
  MergeParams merge;  // present in a stage's first block (stage > 0)
};

// Model constants of one block (allocated and filled by the model).
struct WindowConstants {
  OwnedTensor index;  // [N N] i32 relative position index
  OwnedTensor mask;   // [nW, N, N] in the model's dtype, or empty without a shift
};

// Which samples a training forward drops (see the file comment).
struct DropPathKey {
  bool active = false;  // off: no stochastic depth (evaluation, rate 0)
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t first_sample = 0;   // global index of the micro-batch's sample 0
  int64_t sample_stride = 1;  // between its samples
};

class SwinBlock final : public TrunkBlock {
 public:
  // `constants` and `key` are the model's and outlive the block.
  SwinBlock(const SwinBlockShape& shape, ParameterSet& params, const WindowConstants& constants,
            const DropPathKey& key, double drop_path, int index, SwinBlockParams ids);
  const SwinBlockParams& ids() const { return ids_; }
  const SwinBlockShape& shape() const { return shape_; }
  double drop_path() const { return drop_path_; }
  void set_drop_path(double rate) { drop_path_ = rate; }
  int index() const override { return index_; }
  bool runs() const override;
  bool trains() const override;
  std::vector<int> param_ids() const override;
  bool backward_reads_output() const override { return false; }

  // x [B, R', R', in_dim] -> y [B, R, R, C].
  Forward forward(const Tensor& x, BlockMode mode, Allocator& alloc) override;
  OwnedTensor backward_input(BlockContext& saved, const Tensor& x, const Tensor* y, OwnedTensor dy,
                             bool keep_for_weights, Allocator& alloc) override;
  void backward_weight(BlockContext& saved, const Tensor& x, Allocator& alloc) override;

  // The drop path factors [B] of sample b under `key` for branch 0
  // (attention) or 1 (MLP): 0 for a dropped sample, 1 / (1 - p) else.
  static std::vector<double> drop_factors(const DropPathKey& key, int block, int branch,
                                          double rate, int64_t batch);

 private:
  struct HeadSaved {  // one held head group; M = B R R tokens in window order
    int group = 0;
    OwnedTensor qkv;    // [Bw, N, 3, hg, Dh]
    OwnedTensor out;    // [Bw, N, hg, Dh] attention output (proj's input)
    OwnedTensor probs;  // [Bw, hg, N, N]
  };
  struct MlpSaved {
    int group = 0;
    OwnedTensor pre, act;  // [M, units] fc1 output and its GELU
  };
  struct Saved {
    std::optional<MergeSaved> merge;
    OwnedTensor z;             // [B, R, R, C] the block's input after merging
    OwnedTensor mean1, rstd1;  // [B, R, R]
    OwnedTensor h1w;           // [Bw N, C] LayerNorm1 output in window order
    std::vector<HeadSaved> heads;
    OwnedTensor x_mid;             // [B, R, R, C] after the attention residual
    OwnedTensor mean2, rstd2, h2;  // [B, R, R]; h2 [B, R, R, C] LayerNorm2 output
    std::vector<MlpSaved> mlp;
    OwnedTensor f1, f2;  // [B] drop path factors (accum dtype), or empty
  };
  struct HeadGrads {
    OwnedTensor dqkv;
  };  // [M, 3 hg Dh]
  struct MlpGrads {
    OwnedTensor dpre;
  };                     // [M, units]
  struct OutputGrads {   // what backward_weight needs
    OwnedTensor d_attn;  // [M, C] proj output gradient, window order
    OwnedTensor dh1;     // [B, R, R, C] LayerNorm1 output gradient
    std::vector<HeadGrads> heads;
    OwnedTensor d_mlp;  // [M, C] fc2 output gradient
    OwnedTensor dh2;    // [M, C] LayerNorm2 output gradient
    std::vector<MlpGrads> mlp;
    OwnedTensor dz, dn;  // merging: [B, R, R, C] its output's and [.., 4 Cin] its norm's gradient
  };
  struct Context final : BlockContext {
    std::optional<Saved> saved;
    std::optional<OutputGrads> grads;
  };
  Context& context_of(BlockContext& c) const;
  // The group's qkv weight [3 hg Dh, C] and bias [3 hg Dh] as one matrix.
  Tensor qkv_weight(const HeadGroupParams& g) const;
  Tensor qkv_bias(const HeadGroupParams& g) const;
  int64_t heads_per_group() const { return shape_.heads / static_cast<int64_t>(ids_.heads.size()); }
  int64_t units_per_group() const { return shape_.hidden / static_cast<int64_t>(ids_.mlp.size()); }
  OwnedTensor factors(int branch, int64_t batch, DType dtype, Allocator& alloc) const;

  SwinBlockShape shape_;
  ParameterSet& params_;
  const WindowConstants& constants_;
  const DropPathKey& key_;
  double drop_path_;
  int index_;
  SwinBlockParams ids_;
};

}  // namespace sdp::swin
