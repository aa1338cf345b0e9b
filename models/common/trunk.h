#pragma once
// The trunk of a model: its blocks run forward in order over a residual
// stream and backward in reverse. One loop serves every family (LLaMA
// decoder blocks, ResNet basic blocks); the model keeps its own input stage
// (embedding, stem) and output stage (head and loss).
//
// The trunk owns, per micro-batch (TrunkContext), the residual stream and
// each block's saved context; blocks keep no state between calls. It calls
// the parameter hooks of the block sites (param_hooks.h, Model's contract),
// applies the recompute policy (a checkpointed block keeps only its input,
// which the stream holds anyway, and runs its forward again just before its
// backward) and reports GradsReady block by block, last block first.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "models/common/grads_ready.h"
#include "models/common/param_hooks.h"
#include "models/common/parameter_set.h"
#include "models/common/recompute_policy.h"

namespace sdp {

// How a block's forward runs. train: batch statistics, updating running
// ones (BatchNorm), and a context for backward; recompute: the same
// computation, again, for a checkpointed block just before its backward
// (batch statistics computed again from the same input, running statistics
// left alone); eval: running statistics, no context.
enum class BlockMode : uint8_t { train, recompute, eval };

// What a block's forward saved for its backward; each block kind derives
// its own.
struct BlockContext {
  virtual ~BlockContext() = default;
};

class TrunkBlock {
 public:
  virtual ~TrunkBlock() = default;
  // The block's index in the model (its site is index() + 1).
  virtual int index() const = 0;
  // Whether this process runs the block at all (B-SDP skips unheld blocks)
  // and whether any of its parameters gets gradients here. Valid once the
  // parameters are materialized.
  virtual bool runs() const = 0;
  virtual bool trains() const = 0;
  // Every parameter id the block reads (held or not; buffers excluded), in
  // the order its gradients are reported.
  virtual std::vector<int> param_ids() const = 0;
  // Whether backward_input needs the block's output (ResNet: the output
  // ReLU's gradient); the trunk then keeps that stream entry until then.
  virtual bool backward_reads_output() const = 0;

  struct Forward {
    OwnedTensor y;                        // the block output, next stream entry
    std::unique_ptr<BlockContext> saved;  // null in eval mode
  };
  // x: the block's input (stream entry, owned by the trunk, alive until the
  // block's backward is done).
  virtual Forward forward(const Tensor& x, BlockMode mode, Allocator& alloc) = 0;
  // Gradient of the output dy -> gradient of the input x. y is the block's
  // output when backward_reads_output(), else null. With keep_for_weights
  // `saved` keeps what backward_weight needs; otherwise it is emptied (its
  // tensors freed) before returning.
  virtual OwnedTensor backward_input(BlockContext& saved, const Tensor& x, const Tensor* y,
                                     OwnedTensor dy, bool keep_for_weights, Allocator& alloc) = 0;
  // Accumulates the weight gradients of the trained parameters and empties
  // `saved`.
  virtual void backward_weight(BlockContext& saved, const Tensor& x, Allocator& alloc) = 0;
  // The same for several micro-batches at once (batched deferred weight
  // gradients): saved[k] and x[k] are micro-batch k's. The result is the sum
  // of the per-micro-batch calls (up to rounding). The default loops over
  // backward_weight; a block whose weight gradients are GEMMs overrides it
  // to run one GEMM per weight over the micro-batches' rows concatenated
  // (LLaMA), which is where batching pays.
  virtual void backward_weight_batched(const std::vector<BlockContext*>& saved,
                                       const std::vector<const Tensor*>& x, Allocator& alloc) {
    for (size_t k = 0; k < saved.size(); ++k) backward_weight(*saved[k], *x[k], alloc);
  }
};

// One micro-batch in flight through the trunk.
struct TrunkContext {
  // stream[0] the trunk input, stream[k + 1] the output of ran[k]; an
  // entry is freed once no remaining step needs it (users[k] = 0).
  std::vector<OwnedTensor> stream;
  std::vector<int> users;
  std::vector<size_t> ran;  // positions (in the trunk's blocks) of the blocks that ran
  // Per block that ran: its context (null while checkpointed or once done)
  // and whether its weight gradients are still to come (split backward).
  std::vector<std::unique_ptr<BlockContext>> saved;
  std::vector<bool> weights_pending;
  bool input_pinned = false;  // stream[0] kept for the caller until release_input()
  bool backward_started = false;

  bool empty() const { return stream.empty(); }
  bool has_pending_weights() const;
  // The trunk's input and output entries (views; valid while kept).
  const Tensor& input() const;
  const Tensor& output() const;
};

class Trunk {
 public:
  Trunk(const ParameterSet& params, std::vector<TrunkBlock*> blocks);

  void set_recompute(const RecomputePolicy& policy) { policy_ = policy; }
  const RecomputePolicy& recompute() const { return policy_; }
  // Hooks of the block sites; the pointee is the model's and outlives the trunk.
  void set_hooks(const ParamHooks* hooks) { hooks_ = hooks; }
  const std::vector<TrunkBlock*>& blocks() const { return blocks_; }
  // Whether block b (model index) keeps only its input in a training forward.
  bool checkpointed(int b) const { return policy_.checkpoints(b); }
  // Pipeline stages: only blocks first .. end - 1 (model indices) run; the
  // others are passed by like unheld blocks, whether held here or not.
  // Default: every block.
  void set_block_range(int first, int end) {
    first_block_ = first;
    end_block_ = end;
  }
  bool in_range(int b) const { return b >= first_block_ && (end_block_ < 0 || b < end_block_); }

  // Runs the blocks that run (in the block range) over x0 (moved into the stream) and returns
  // the output entry (the last block's output, or x0 when none runs).
  // train = false (evaluation) keeps only the newest entry and no context.
  // In training, stream[0] stays until release_input() or the context's end
  // when keep_input, and otherwise until its block no longer needs it.
  const Tensor& forward(TrunkContext& ctx, OwnedTensor x0, bool train, bool keep_input,
                        Allocator& alloc) const;
  // Backward of a training forward: dy (the output entry's gradient) ->
  // the input's gradient. The caller's output stage must be done with the
  // output entry. With split_weight_grads the blocks keep what their weight
  // gradients need until backward_weight().
  OwnedTensor backward(TrunkContext& ctx, OwnedTensor dy, bool split_weight_grads,
                       const GradsReady& ready, Allocator& alloc) const;
  void backward_weight(TrunkContext& ctx, const GradsReady& ready, Allocator& alloc) const;
  // The deferred weight gradients of several micro-batches, block by block
  // (last block first), each block's in one backward_weight_batched call
  // over every context that still holds them. `ready` hears of a block's
  // parameters once per micro-batch, as from backward_weight per context.
  void backward_weight_batched(const std::vector<TrunkContext*>& ctxs, const GradsReady& ready,
                               Allocator& alloc) const;
  // The caller is done with stream[0].
  void release_input(TrunkContext& ctx) const;

 private:
  void release_user(TrunkContext& ctx, size_t entry) const;
  void report(const TrunkBlock& block, const GradsReady& ready) const;
  void needed(const TrunkBlock& b, ParamPass pass) const;
  void done(const TrunkBlock& b, ParamPass pass) const;

  const ParameterSet& params_;
  std::vector<TrunkBlock*> blocks_;
  RecomputePolicy policy_;
  const ParamHooks* hooks_ = nullptr;
  int first_block_ = 0, end_block_ = -1;  // -1: through the last block
};

}  // namespace sdp
