#pragma once
// The interface the engine trains: a model of any family (LLaMA language
// models, CIFAR ResNets, Swin Transformers) cut into components
// (component.h), its parameters in a ParameterSet, and one micro-batch's
// forward / backward with the backward split into input and weight
// gradients (2BP, backward masking). The trainer, strategies and
// checkpoints see only this; each family keeps its own configuration and
// layers (models/llama, models/resnet, models/swin) on the skeleton of
// block_model.h, and models/registry.h builds one by name.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/tensor.h"
#include "models/common/component.h"
#include "models/common/grads_ready.h"
#include "models/common/param_hooks.h"
#include "models/common/parameter_set.h"
#include "models/common/recompute_policy.h"
#include "models/common/stage_span.h"

namespace sdp {

class Model {
 public:
  virtual ~Model() = default;

  // The registry name ("tiny", "llama-134m", "resnet18", ...).
  virtual const std::string& name() const = 0;
  // Trainable parameters of the full model (buffers excluded; a tied
  // embedding counted once).
  virtual int64_t parameter_count() const = 0;
  // The model's configuration as written to a checkpoint's config.json and
  // compared when one is loaded (for LLaMA: the Hugging Face config).
  virtual nlohmann::json config_json() const = 0;

  virtual ParameterSet& params() = 0;
  virtual const ParameterSet& params() const = 0;
  // Components with their parameters and storage groups, in model order.
  virtual const std::vector<Component>& components() const = 0;
  virtual const ModelLayout& layout() const = 0;
  // The shared parameters that serve one sublayer of a block (component.h),
  // in declaration order; none at block granularity.
  virtual const std::vector<SublayerParam>& sublayer_params() const {
    static const std::vector<SublayerParam> none;
    return none;
  }

  // Allocates the parameters (and buffers) of the held storage groups (all
  // when empty), keeps gradients for the trained ones (default = held), and
  // any model constants, on `alloc`, which also serves every activation.
  // `storage` says how the whole tensors of each group are stored, as a
  // training state decides (ParameterSet::materialize).
  virtual void materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held_groups = {},
                           const std::vector<bool>& trained_groups = {},
                           const std::vector<WholeStorage>& storage = {}) = 0;
  virtual Allocator& allocator() const = 0;
  virtual DType dtype() const = 0;

  // One micro-batch. inputs: tokens [B, T] i32 (LLaMA) or images
  // [B, C, H, W] in the model's dtype (ResNet); targets: next tokens [B, T]
  // or labels [B], i32, negative = ignored. Returns the summed loss over
  // valid targets (NaN on meta) and sets valid_targets().
  // keep_for_backward = false is evaluation: nothing is kept for backward,
  // and layers with a train / eval difference (BatchNorm) use eval mode.
  // micro_batch keys what a training forward keeps: several micro-batches
  // may be in flight at once (forward 0, forward 1, backward 1, backward
  // 0), each backward taking back its own forward's state. A training
  // forward of a micro-batch still in flight first drops that micro-batch's
  // state (including weight gradients a split backward left pending).
  // The inputs must stay alive until the micro-batch's backward is done.
  virtual double forward(const Tensor& inputs, const Tensor& targets,
                         bool keep_for_backward = true, int micro_batch = 0) = 0;
  virtual int64_t valid_targets() const = 0;  // of the latest forward
  // Classifiers count top-k accuracy at every forward that computes the
  // loss: accuracy_top_k() lists the k (ascending; empty: none counted) and
  // top_k_correct() gives, for the latest such forward, the valid targets
  // among the k largest logits of their row for each k (zeros on meta).
  // Image classifiers count top-1, and top-5 where they have at least 10
  // classes; token models count none in training (a next-token top-1 would
  // be one more pass over vocabulary-wide logits per micro-batch).
  // Evaluation forwards (keep_for_backward = false) count evaluation_top_k():
  // accuracy_top_k(), and for token models a next-token top-1 (one pass over
  // the logits of the few evaluation batches). top_k_correct() follows the
  // latest forward's list.
  virtual std::vector<int> accuracy_top_k() const { return {}; }
  virtual std::vector<int> evaluation_top_k() const { return accuracy_top_k(); }
  virtual std::vector<int64_t> top_k_correct() const { return {}; }
  // Backward of micro-batch `micro_batch`'s training forward; loss_scale
  // multiplies each example's loss (1 / examples in the global batch).
  // Weight gradients of trained parameters accumulate into params().grad();
  // held but untrained ones get none. With split_weight_grads the caller
  // runs backward_weight(micro_batch) later (2BP).
  // `ready` hears of every trained parameter once its gradient is final.
  virtual void backward(double loss_scale, bool split_weight_grads = false,
                        const GradsReady& ready = {}, int micro_batch = 0) = 0;
  virtual void backward_weight(const GradsReady& ready = {}, int micro_batch = 0) = 0;
  // backward_weight of several micro-batches at once (batched deferred
  // weight gradients, the 2BP authors' form): the same gradients up to
  // rounding, but each layer whose weight gradient is a GEMM computes it
  // for all of them as ONE GEMM over their rows concatenated (dW =
  // dY_cat^T X_cat) instead of one accumulating GEMM per micro-batch. The
  // concatenated copies are workspace, allocated per layer and freed after
  // it (the meta device counts them). Other weight gradients (norm gains,
  // embeddings, convolutions, BatchNorm) run per micro-batch inside the
  // call. `ready` hears of each parameter once per micro-batch, as from
  // the per-micro-batch calls. Default: backward_weight in the given order.
  virtual void backward_weight_batched(const std::vector<int>& micro_batches,
                                       const GradsReady& ready = {}) {
    for (int mb : micro_batches) backward_weight(ready, mb);
  }

  // ---- sites and parameter hooks
  // A site is a place of the model that reads parameters: site 0 the input
  // stage (LLaMA: embedding; ResNet: stem convolution + BatchNorm), site
  // 1 + b block b (b = 0 .. L-1), site L + 1 the output stage (LLaMA: final
  // norm + LM head; ResNet: pooling + classifier).
  virtual int site_count() const = 0;  // L + 2
  // Ids of every parameter (not buffers) site `site` reads, held by this
  // rank or not. A parameter read at two sites is listed at both (LLaMA's
  // tied embedding: sites 0 and L + 1). Block sites list the parameters the
  // model declares with the block even when they live in a shared component
  // (LLaMA's norms and ResNet's bn2 at neuron granularity, ResNet's
  // downsampling shortcut convolution and BatchNorm).
  virtual std::vector<int> site_params(int site) const = 0;
  // The hooks' contract, which the sharding layer relies on:
  //  * forward (training and evaluation, recalibrate_statistics and the
  //    models' logits()): for each site that runs, in model order
  //    (0, 1, ..., L + 1), needed(s, forward) before its first parameter
  //    read and done(s, forward) after its last; the pairs do not nest or
  //    overlap (a site's done comes before the next site's needed). A
  //    site's buffers (BatchNorm running statistics, not in site_params)
  //    are read, and in training moved, inside its forward window.
  //  * backward, in reverse order (L + 1, ..., 1, 0): needed(s, backward)
  //    before the site's first parameter read of backward, done(s,
  //    backward) after its last. A checkpointed block (set_recompute) gets
  //    needed(s, backward) before its recomputation: the parameters stay
  //    needed from the recomputed forward through its backward_input, and
  //    the recomputation gets no forward calls of its own.
  //    Weight gradients read no parameter (checked in the code: LLaMA's
  //    linear, RMSNorm and embedding weight gradients read only
  //    activations, statistics and output gradients; ResNet's convolution
  //    and BatchNorm weight gradients likewise), so done(s, backward) comes
  //    after the site's input gradient, before its weight gradients; with
  //    split_weight_grads backward_weight() makes no calls at all.
  //    Gradients (params().grad()) are thus written outside the windows.
  //    A site whose backward reads no parameter on this rank gets no
  //    backward calls: LLaMA's site 0 never (the embedding gradient is a
  //    scatter of the output gradient), ResNet's site 0 when its
  //    convolution is not trained here (the images need no gradient, so
  //    only a trained stem runs the BatchNorm input gradient, which reads
  //    bn1.weight).
  //  * a site that does not run on this rank gets no calls at all: a
  //    B-SDP block whose parameters are not held here, skipped with the
  //    residual stream passing by (LLaMA: any such block; ResNet: an
  //    identity block; a downsampling block without its groups still runs
  //    its shared shortcut and gets its calls).
  //  * with several micro-batches in flight, each forward and backward
  //    makes its own calls, in the order they run.
  // The hooks are called from the thread that runs the model. Empty
  // functions are not called.
  virtual void set_param_hooks(ParamHooks hooks) = 0;

  // ---- pipeline stages (stage_span.h)
  // A model family that cannot be cut into stages keeps the defaults: the
  // whole span only, and a clear refusal of the stage calls.
  // The model's blocks (sites 1 .. L).
  int block_count() const { return site_count() - 2; }
  // Restricts training to the sites of `span`: forward_stage /
  // backward_stage run only its blocks, with the input stage on the first
  // stage and the output stage on the last. Call after materialize(); the
  // span's parameters must be held here (other blocks' may be absent).
  // Hooks are called for the span's sites only. Fails for a span outside
  // the model, an empty one, or (LLaMA) a tied embedding split from the
  // head (embedding and head would live on different stages).
  // forward() and backward() need the whole span (the default); evaluation
  // (keep_for_backward = false) of a partial span is refused.
  virtual void set_stage(const StageSpan& span) {
    if (!span.whole(block_count()))
      fail("model ", name(), " cannot be cut into pipeline stages (asked for ",
           span.describe(block_count()), ")");
  }
  virtual const StageSpan& stage() const {
    static const StageSpan whole;
    return whole;
  }
  // Shape of the residual stream entering block `block` (0 .. L - 1) for a
  // micro-batch whose model inputs are `inputs` (only their shape is read):
  // LLaMA [B, T, D]; ResNet [B, C, H, W]; Swin [B, R, R, C] (before the
  // block's merging). Its dtype is dtype().
  virtual Shape block_input_shape(const Tensor& inputs, int block) const {
    (void)inputs;
    fail("model ", name(), " has no blocks (block_input_shape of block ", block, ")");
  }
  // Shape of the activation a stage that starts at block `first_block` (> 0)
  // receives: block_input_shape of that block.
  virtual Shape stage_input_shape(const Tensor& inputs, int first_block) const {
    (void)inputs;
    fail("model ", name(), " has no pipeline stages (stage_input_shape at block ", first_block, ")");
  }
  // A training forward of micro-batch `micro_batch` through the stage.
  // inputs / targets as forward(): the first stage reads inputs, the last
  // reads targets; other stages may pass empty tensors for what they do
  // not read. `received`: the previous stage's output (any stage but the
  // first; moved in, and kept by the stage until its backward needs it no
  // more), shape stage_input_shape(). Returns the summed loss on the last
  // stage (and sets valid_targets()), 0 on the others.
  virtual double forward_stage(const Tensor& inputs, const Tensor& targets, OwnedTensor received,
                               int micro_batch) {
    (void)received;
    SDP_CHECK(stage().whole(block_count()), "forward_stage of model ", name(), " without stages");
    return forward(inputs, targets, true, micro_batch);
  }
  // The output of micro-batch `micro_batch`'s stage forward (not on the last
  // stage): what goes to the next stage. Valid until that micro-batch's
  // backward_stage returns.
  virtual const Tensor& stage_output(int micro_batch) const {
    fail("model ", name(), " has no pipeline stages (stage_output of micro-batch ", micro_batch,
         ")");
  }
  // Backward of a stage forward. The last stage starts from its loss
  // (loss_scale as backward(); output_grad empty); the others from
  // output_grad, the next stage's gradient of stage_output (moved in; shape
  // of stage_output). Returns the gradient of `received`, to send to the
  // previous stage, or an empty tensor on the first stage. Split weight
  // gradients and `ready` as backward(); backward_weight finishes a split.
  virtual OwnedTensor backward_stage(OwnedTensor output_grad, double loss_scale,
                                     bool split_weight_grads, const GradsReady& ready,
                                     int micro_batch) {
    (void)output_grad;
    backward(loss_scale, split_weight_grads, ready, micro_batch);
    return OwnedTensor();
  }

  // ---- activation checkpointing
  // Which blocks keep only their input during a training forward and run
  // their forward again just before their backward (recompute_policy.h).
  // Gradients are the same as without; the recomputation does not update
  // batch statistics a second time. Default none; a model without blocks
  // refuses anything else.
  virtual void set_recompute(const RecomputePolicy& policy) {
    if (policy.enabled())
      fail("activation checkpointing '", policy.name(), "' needs a model with blocks; ", name(),
           " supports only 'none'");
  }

  // ---- token models (LLaMA)
  // The embeddings a token model has (its vocabulary; 0: an image model)
  // and the longest sequence it reads (0: any, or an image model).
  virtual int64_t token_vocabulary() const { return 0; }
  virtual int64_t max_sequence() const { return 0; }

  // ---- image models (ResNet, Swin)
  // The channels of the images an image classifier reads (0: a token
  // model), and the side it needs (0: any size; a Swin's img_size).
  virtual int64_t image_channels() const { return 0; }
  virtual int64_t image_side() const { return 0; }
  // The model's inputs for `batch` examples: tokens [batch, seq], or images
  // [batch, C, S, S] with S = image_side(), or seq where any side goes.
  Shape input_shape(int64_t batch, int64_t seq) const {
    if (image_channels() == 0) return {batch, seq};
    const int64_t side = image_side() > 0 ? image_side() : seq;
    return {batch, image_channels(), side, side};
  }

  // ---- stochastic depth
  // Models with stochastic depth (Swin's drop path) drop whole residual
  // branches per sample in training. Which samples is a function of the
  // key alone, never of the rank: sample b of micro-batch `micro_batch` of
  // a training forward has the global index
  //   first_sample + micro_batch * micro_batch_stride + b * sample_stride
  // in the step's stream, so a distributed run drops exactly the samples
  // the single-process run drops. Until a key is set nothing is dropped.
  struct SampleKey {
    uint64_t seed = 0;
    int64_t step = 0;
    int64_t first_sample = 0;
    int64_t sample_stride = 1;
    int64_t micro_batch_stride = 0;
  };
  virtual void set_sample_key(const SampleKey& key) { (void)key; }
  virtual bool has_stochastic_depth() const { return false; }
  // The largest rate (the last block's, in timm's linear schedule).
  virtual double drop_path() const { return 0.0; }
  virtual void set_drop_path(double rate) {
    if (rate != 0.0)
      fail("drop_path = ", rate, ": model ", name(), " has no stochastic depth (only 0 is valid)");
  }

  // Models with batch statistics (BatchNorm running statistics, buffers of
  // the ParameterSet) re-estimate them for the parameters they hold now:
  // reset, then the exact mean over training-mode forwards of the batches
  // `next` yields (it fills inputs and targets and returns false when done);
  // nothing is kept, no gradient is computed. Used where the statistics at
  // hand do not belong to this network (a full model assembled from
  // subnetworks). Models without batch statistics do nothing.
  using BatchFeed = std::function<bool(Tensor& inputs, Tensor& targets)>;
  virtual bool has_batch_statistics() const { return false; }
  virtual void recalibrate_statistics(const BatchFeed& next) { (void)next; }
};

}  // namespace sdp
