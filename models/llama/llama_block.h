#pragma once
// One LLaMA decoder block:
//   h1 = RMSNorm(x); a = Attention(RoPE(h1 Wq^T), RoPE(h1 Wk^T), h1 Wv^T)
//   m  = x + a Wo^T; h2 = RMSNorm(m); y = m + (silu(h2 Wg^T) * (h2 Wu^T)) Wd^T
// Backward is split: backward_input() computes the gradient for the block's
// input and keeps what the weight gradients need; backward_weight() computes
// those (+=) later or right away. Skipping backward_weight() is backward
// masking: no weight-gradient work at all for a block this rank does not own.
#include <optional>

#include "engine/core/tensor.h"
#include "models/common/parameter_set.h"
#include "models/llama/llama_config.h"

namespace sdp::llama {

struct BlockParams {
  int norm1 = -1, wq = -1, wk = -1, wv = -1, wo = -1;
  int norm2 = -1, wgate = -1, wup = -1, wdown = -1;
};

// Shapes of one micro-batch: N = batch * seq tokens.
struct BatchShape {
  int64_t batch = 0, seq = 0;
  int64_t tokens() const { return batch * seq; }
};

class LlamaBlock {
 public:
  LlamaBlock(const LlamaConfig& config, ParameterSet& params, int index, int group);

  // Declares this block's parameters (Hugging Face names) in `group`.
  static BlockParams declare(const LlamaConfig& config, ParameterSet& params, int index,
                             int group);
  const BlockParams& ids() const { return ids_; }

  // x_in [N, D] moves into the block's saved context; returns y [N, D].
  // rope_cos, rope_sin [max_seq, Dh/2].
  OwnedTensor forward(OwnedTensor x_in, const BatchShape& shape, const Tensor& rope_cos,
                      const Tensor& rope_sin, Allocator& alloc);
  // Gradient of the block output dy [N, D] -> gradient of its input [N, D].
  // With keep_for_weights, the output gradients of every matmul and norm are
  // kept until backward_weight(); otherwise they are freed here.
  OwnedTensor backward_input(OwnedTensor dy, const Tensor& rope_cos, const Tensor& rope_sin,
                             bool keep_for_weights, Allocator& alloc);
  // Accumulates this block's parameter gradients and frees the saved context.
  void backward_weight();
  // Frees everything saved by forward (without computing weight gradients).
  void release();

  // Bytes of activations forward() saves for backward, for planning.
  static size_t saved_activation_bytes(const LlamaConfig& c, const BatchShape& s, DType dtype,
                                       const Allocator& alloc);

 private:
  struct Saved {  // forward context (all [N, *] unless noted)
    OwnedTensor x_in, rstd1, h1, q, k, v, attn, lse, x_mid, rstd2, h2, gate, up, act;
  };
  struct OutputGrads {  // what backward_weight needs
    OwnedTensor dy, d_mid, dh2, dh1, dgate, dup, dq, dk, dv;
  };

  const LlamaConfig& config_;
  ParameterSet& params_;
  int index_;
  BlockParams ids_;
  BatchShape shape_;
  std::optional<Saved> saved_;
  std::optional<OutputGrads> grads_;
};

}  // namespace sdp::llama
