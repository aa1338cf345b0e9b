#pragma once
// One LLaMA decoder block:
//   h1 = RMSNorm(x); a = Attention(RoPE(h1 Wq^T), RoPE(h1 Wk^T), h1 Wv^T)
//   m  = x + a Wo^T; h2 = RMSNorm(m); y = m + (silu(h2 Wg^T) * (h2 Wu^T)) Wd^T
//
// The attention is stored as head groups (consecutive KV heads with their
// query heads: rows of Wq, Wk, Wv and the matching columns of Wo) and the
// FFN as unit groups (rows of Wg, Wu and columns of Wd). Heads and FFN units
// are independent, so the block computes on the groups it holds: they run
// as one pack (models/common/packed_pieces.h), one GEMM per weight and one
// attention call over the held heads together, whose activations hold only
// the held heads / units. A rank that does not hold a group (N-SDP forward
// masking) simply has narrower matrices and narrower activations. A whole
// block (B-SDP) is one head group and one FFN group.
//
// The block is a TrunkBlock (models/common/trunk.h): the trunk owns its
// input and output (residual stream entries) and the context its forward
// saves. Backward is split: backward_input() computes the gradient for the
// block's input and keeps what the weight gradients of *trained* groups
// need; backward_weight() computes those (+=) later or right away, for the
// trained groups' share of the pack: groups held but not trained (backward
// masking) get no weight-gradient work at all.
#include <optional>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/packed_pieces.h"
#include "models/common/parameter_set.h"
#include "models/common/trunk.h"
#include "models/llama/llama_config.h"

namespace sdp::llama {

struct HeadGroupParams {   // q_rows = group query heads * Dh, kv_rows = group KV heads * Dh
  int wq = -1;             // [q_rows, D]
  int wk = -1, wv = -1;    // [kv_rows, D]
  int wo = -1;             // [D, q_rows]
};
struct FfnGroupParams {    // units = FFN units in the group
  int wgate = -1, wup = -1;  // [units, D]
  int wdown = -1;            // [D, units]
};
struct BlockParams {
  int norm1 = -1, norm2 = -1;         // [D]
  std::vector<HeadGroupParams> heads;  // all groups of the model, held or not
  std::vector<FfnGroupParams> ffn;
};

// Shapes of one micro-batch: N = batch * seq tokens.
struct BatchShape {
  int64_t batch = 0, seq = 0;
  int64_t tokens() const { return batch * seq; }
};

// The RoPE tables [max_seq, Dh/2], constants of the model.
struct RopeTables {
  OwnedTensor cos, sin;
};

class LlamaBlock final : public TrunkBlock {
 public:
  // `rope` is the model's; it outlives the block and is filled when the
  // model is materialized.
  LlamaBlock(const LlamaConfig& config, ParameterSet& params, const RopeTables& rope, int index,
             BlockParams ids);
  const BlockParams& ids() const { return ids_; }
  int index() const override { return index_; }

  // Whether this process runs the block at all (B-SDP skips unheld blocks:
  // the residual stream passes through) and whether any of its parameters
  // gets gradients here. Valid after the parameters are materialized.
  bool runs() const override;
  bool trains() const override;
  // norm1, norm2, then every head group (wq, wk, wv, wo), then every FFN
  // group (wgate, wup, wdown).
  std::vector<int> param_ids() const override;
  bool backward_reads_output() const override { return false; }

  // x [B, T, D] (the stream entry; the context keeps no copy) -> y
  // [B, T, D]. Train and recompute compute the same; eval saves nothing.
  Forward forward(const Tensor& x, BlockMode mode, Allocator& alloc) override;
  // Gradient of the block output dy [B, T, D] -> gradient of its input
  // [B, T, D]. With keep_for_weights, the output gradients the trained
  // groups need are kept until backward_weight(); otherwise everything is
  // freed here.
  OwnedTensor backward_input(BlockContext& saved, const Tensor& x, const Tensor* y,
                             OwnedTensor dy, bool keep_for_weights, Allocator& alloc) override;
  // Accumulates the gradients of the trained parameters and frees the context.
  void backward_weight(BlockContext& saved, const Tensor& x, Allocator& alloc) override;
  // Several micro-batches' weight gradients: each of the seven linear
  // weights (per pack) in ONE GEMM over the micro-batches' rows
  // concatenated, dW += dY_cat^T X_cat with [sum N, *] operands; the
  // concatenations are workspace, built per layer (an input shared by
  // several weights, h1 and h2, once) and freed after it, and each
  // micro-batch's own copy is freed as soon as it is concatenated. The
  // RMSNorm gains run per micro-batch.
  void backward_weight_batched(const std::vector<BlockContext*>& saved,
                               const std::vector<const Tensor*>& x, Allocator& alloc) override;

  // Bytes of activations a training forward's context keeps for backward
  // with the groups held here (the block's input, a stream entry, not
  // included), for planning.
  size_t saved_context_bytes(const BatchShape& s, DType dtype, const Allocator& alloc) const;

 private:
  struct HeadSaved {  // the pack of held head groups: [N, rows] unless noted
    GroupPack pack;
    OwnedTensor q, k, v, attn, lse;  // q, k with RoPE applied; lse [B, heads, T]
  };
  struct FfnSaved {  // the pack of held FFN groups: [N, units]
    GroupPack pack;
    OwnedTensor gate, up, act;  // act = silu(gate) * up
  };
  struct Saved {  // forward context, [N, D] unless noted
    OwnedTensor rstd1, h1, x_mid, rstd2, h2;  // rstd [N]
    std::vector<HeadSaved> heads;
    std::vector<FfnSaved> ffn;
  };
  struct HeadGrads { OwnedTensor dq, dk, dv; };   // trained groups only
  struct FfnGrads { OwnedTensor dgate, dup; };
  struct OutputGrads {  // what backward_weight needs
    OwnedTensor dy, d_mid, dh2, dh1;
    std::vector<HeadGrads> heads;  // parallel to Saved::heads
    std::vector<FfnGrads> ffn;     // parallel to Saved::ffn
  };
  struct Context final : BlockContext {
    BatchShape shape;
    std::optional<Saved> saved;
    std::optional<OutputGrads> grads;
  };
  Context& context_of(BlockContext& c) const;
  // dw += dy^T in for the trained groups of one layer of a pack: `dy` is the
  // layer's output-gradient side [rows, out], `in` its input side [rows,
  // in]; `rows_hold_groups` says which side holds the groups (rows of w:
  // dy's columns; columns of w: in's columns).
  void add_weight_grad(const GroupPack& pack, const std::vector<int>& ids, const Tensor& dy,
                       const Tensor& in, bool rows_hold_groups, Allocator& alloc) const;

  // The held head / FFN groups as a pack (none or one), and the pack's
  // pieces of one weight, in its group order.
  std::vector<GroupPack> head_packs() const;
  std::vector<GroupPack> ffn_packs() const;
  std::vector<int> head_ids(const GroupPack& pack, int HeadGroupParams::*w) const;
  std::vector<int> ffn_ids(const GroupPack& pack, int FfnGroupParams::*w) const;

  int64_t q_heads_per_group() const;
  int64_t kv_heads_per_group() const;
  int64_t units_per_group() const;

  const LlamaConfig& config_;
  ParameterSet& params_;
  const RopeTables& rope_;
  int index_;
  BlockParams ids_;
};

}  // namespace sdp::llama
