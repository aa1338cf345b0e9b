#pragma once
// One LLaMA decoder block:
//   h1 = RMSNorm(x); a = Attention(RoPE(h1 Wq^T), RoPE(h1 Wk^T), h1 Wv^T)
//   m  = x + a Wo^T; h2 = RMSNorm(m); y = m + (silu(h2 Wg^T) * (h2 Wu^T)) Wd^T
//
// The attention is stored as head groups (consecutive KV heads with their
// query heads: rows of Wq, Wk, Wv and the matching columns of Wo) and the
// FFN as unit groups (rows of Wg, Wu and columns of Wd). Heads and FFN units
// are independent, so the block computes on the groups it holds and sums
// their contributions to the residual stream: a rank that does not hold a
// group (N-SDP forward masking) simply has narrower matrices and narrower
// activations. A whole block (B-SDP) is one head group and one FFN group.
//
// Backward is split: backward_input() computes the gradient for the block's
// input and keeps what the weight gradients of *trained* groups need;
// backward_weight() computes those (+=) later or right away. Groups held but
// not trained (backward masking) get no weight-gradient work at all.
#include <optional>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/parameter_set.h"
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

class LlamaBlock {
 public:
  LlamaBlock(const LlamaConfig& config, ParameterSet& params, int index, BlockParams ids);
  const BlockParams& ids() const { return ids_; }
  int index() const { return index_; }

  // Whether this process runs the block at all (B-SDP skips unheld blocks:
  // the residual stream passes through) and whether any of its parameters
  // gets gradients here. Valid after the parameters are materialized.
  bool active() const;
  bool trained() const;

  // x_in [N, D] moves into the block's saved context; returns y [N, D].
  // rope_cos, rope_sin [max_seq, Dh/2].
  OwnedTensor forward(OwnedTensor x_in, const BatchShape& shape, const Tensor& rope_cos,
                      const Tensor& rope_sin, Allocator& alloc);
  // Gradient of the block output dy [N, D] -> gradient of its input [N, D].
  // With keep_for_weights, the output gradients the trained groups need are
  // kept until backward_weight(); otherwise everything is freed here.
  OwnedTensor backward_input(OwnedTensor dy, const Tensor& rope_cos, const Tensor& rope_sin,
                             bool keep_for_weights, Allocator& alloc);
  // Accumulates the gradients of the trained parameters and frees the context.
  void backward_weight();
  // Frees everything saved by forward (without computing weight gradients).
  void release();

  // Bytes of activations forward() saves for backward with the groups held
  // here, for planning.
  size_t saved_activation_bytes(const BatchShape& s, DType dtype, const Allocator& alloc) const;

 private:
  struct HeadSaved {  // one held head group: [N, rows] unless noted
    int group = 0;
    OwnedTensor q, k, v, attn, lse;  // q, k with RoPE applied; lse [B, heads, T]
  };
  struct FfnSaved {
    int group = 0;
    OwnedTensor gate, up, act;  // act = silu(gate) * up
  };
  struct Saved {  // forward context, [N, D] unless noted
    OwnedTensor x_in, rstd1, h1, x_mid, rstd2, h2;  // rstd [N]
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

  int64_t q_heads_per_group() const;
  int64_t kv_heads_per_group() const;
  int64_t units_per_group() const;

  const LlamaConfig& config_;
  ParameterSet& params_;
  int index_;
  BlockParams ids_;
  BatchShape shape_;
  std::optional<Saved> saved_;
  std::optional<OutputGrads> grads_;
};

}  // namespace sdp::llama
