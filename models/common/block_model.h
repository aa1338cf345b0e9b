#pragma once
// The skeleton every family with blocks shares (LLaMA, ResNet, Swin): the
// micro-batch protocol of Model written once. A training forward of a
// micro-batch runs the input stage (first pipeline stage only), the stage's
// blocks through the Trunk, then the output stage and the cross-entropy loss
// (last pipeline stage only), and keeps what its backward needs under the
// micro-batch's key; backward runs them in reverse, with the blocks' weight
// gradients optionally split off (backward_weight). forward() / backward()
// are the stage calls on the whole span.
//
// A family derives from BlockModel and supplies only what differs: its
// parameters and blocks (set_blocks), its input stage (inputs -> the first
// block's input), its output stage (the last block's output -> logits),
// block_input_shape, and the checks of what it reads.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "models/common/model.h"
#include "models/common/trunk.h"

namespace sdp {

// What an input or output stage keeps from a training forward for its
// backward; each family derives its own.
struct StageContext {
  virtual ~StageContext() = default;
};

// What the output stage and the loss keep for backward.
struct HeadContext {
  OwnedTensor logits;  // [rows, classes]; backward turns it into its own gradient
  OwnedTensor lse;     // [rows], in accum_dtype
  Tensor targets;      // [rows] i32, the caller's (flattened)
  std::unique_ptr<StageContext> saved;  // the family's output stage's
  // Frees all of it (a family's output backward decides when).
  void release() {
    saved.reset();
    lse = OwnedTensor();
    logits = OwnedTensor();
  }
};

class BlockModel : public Model {
 public:
  explicit BlockModel(ModelLayout layout) : layout_(std::move(layout)) {}
  BlockModel(const BlockModel&) = delete;
  BlockModel& operator=(const BlockModel&) = delete;

  ParameterSet& params() override { return params_; }
  const ParameterSet& params() const override { return params_; }
  const std::vector<Component>& components() const override { return components_; }
  const ModelLayout& layout() const override { return layout_; }
  const std::vector<SublayerParam>& sublayer_params() const override { return sublayer_params_; }
  // Allocates the held parameters, then the family's constants (RoPE
  // tables, window masks), on `alloc`, which serves every activation later.
  void materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held_groups = {},
                   const std::vector<bool>& trained_groups = {},
                   const std::vector<WholeStorage>& storage = {}) override;
  Allocator& allocator() const override { return *alloc_; }
  DType dtype() const override { return dtype_; }

  double forward(const Tensor& inputs, const Tensor& targets, bool keep_for_backward = true,
                 int micro_batch = 0) override;
  int64_t valid_targets() const override { return valid_targets_; }
  std::vector<int64_t> top_k_correct() const override { return top_k_correct_; }
  void backward(double loss_scale, bool split_weight_grads = false, const GradsReady& ready = {},
                int micro_batch = 0) override;
  // Deferred weight gradients of every block still holding them.
  void backward_weight(const GradsReady& ready = {}, int micro_batch = 0) override;
  // The blocks' deferred weight gradients of every listed micro-batch, block
  // by block (Trunk::backward_weight_batched).
  void backward_weight_batched(const std::vector<int>& micro_batches,
                               const GradsReady& ready = {}) override;

  // Sites (model.h): 0 the input stage, 1 + b block b, L + 1 the output stage.
  int site_count() const override { return static_cast<int>(trunk_->blocks().size()) + 2; }
  std::vector<int> site_params(int site) const override;
  void set_param_hooks(ParamHooks hooks) override { hooks_ = std::move(hooks); }

  // Pipeline stages (model.h). A stage that starts after block 0 receives
  // its first block's input (block_input_shape) instead of running the input
  // stage; one that ends before the last block hands on its last stream
  // entry.
  void set_stage(const StageSpan& span) override;
  const StageSpan& stage() const override { return stage_; }
  Shape stage_input_shape(const Tensor& inputs, int first_block) const override;
  double forward_stage(const Tensor& inputs, const Tensor& targets, OwnedTensor received,
                       int micro_batch) override;
  const Tensor& stage_output(int micro_batch) const override;
  // Output stage backward (last stage) or `output_grad`, the blocks, the
  // input stage's weight gradients (first stage); returns the trunk input's
  // gradient on a non-first stage.
  OwnedTensor backward_stage(OwnedTensor output_grad, double loss_scale, bool split_weight_grads,
                             const GradsReady& ready, int micro_batch) override;

  // A checkpointed block's recomputation computes the same values (batch
  // statistics again, running ones left alone; the same dropped samples).
  void set_recompute(const RecomputePolicy& policy) override { trunk_->set_recompute(policy); }
  const RecomputePolicy& recompute() const { return trunk_->recompute(); }
  // Micro-batches whose training forward is kept (until their backward).
  size_t micro_batches_in_flight() const { return in_flight_.size(); }

 protected:
  // ---- what a family supplies
  // Checks a first stage's model inputs; returns the targets' shape.
  virtual Shape check_inputs(const Tensor& inputs) const = 0;
  // Checks what a later stage received (shape block_input_shape of its first
  // block); returns the targets' shape.
  virtual Shape check_received(const Tensor& received) const = 0;
  // The word the messages use for the targets ("targets", "labels").
  virtual const char* targets_word() const { return "targets"; }
  // Model constants built at materialize(), after the parameters.
  virtual void materialize_constants() {}
  // The parameters of the input and output sites (model.h's site_params).
  virtual std::vector<int> input_site_params() const = 0;
  virtual std::vector<int> output_site_params() const = 0;
  // The input stage, inside its site's hook calls: inputs -> block 0's
  // input. `saved` keeps what input_backward needs (train) or what is to
  // stay alive while the blocks run (evaluation: dropped after them).
  virtual OwnedTensor input_forward(const Tensor& inputs, bool train,
                                    std::unique_ptr<StageContext>& saved) = 0;
  // Whether input_backward reads block 0's input (the trunk then keeps it
  // until input_backward releases it: trunk_->release_input).
  virtual bool input_backward_reads_output() const { return false; }
  // The input stage's weight gradients from `dx`, the gradient of block 0's
  // input; reports them to `ready` and frees `saved` and `dx`.
  virtual void input_backward(std::unique_ptr<StageContext>& saved, OwnedTensor dx,
                              TrunkContext& trunk, const GradsReady& ready) = 0;
  // The output stage, inside its site's hook calls: the last block's output
  // -> head.logits [rows, classes]; what its backward needs in head.saved
  // (filled in evaluation too, and dropped after the loss). train: a
  // training forward.
  virtual void output_forward(const Tensor& trunk_output, bool train, HeadContext& head) = 0;
  // After the loss of a training forward: drop what backward does not need.
  virtual void trim_head(HeadContext& head) { (void)head; }
  // The output stage's backward from head.logits (already the logits'
  // gradient): reports its weight gradients, releases `head` when it is
  // done with it and returns the gradient of the last block's output.
  virtual OwnedTensor output_backward(HeadContext& head, const Tensor& trunk_output,
                                      const GradsReady& ready) = 0;
  // Called around the trunk's forward (with the input stage) and its
  // backward: what the blocks read per micro-batch (Swin's dropped samples).
  virtual void enter_trunk(int micro_batch, bool train, bool backward) {
    (void)micro_batch, (void)train, (void)backward;
  }
  virtual void leave_trunk() {}

  // ---- for the families
  // Takes the family's components, places them in storage groups, has
  // `declare` declare their parameters (and the blocks: set_blocks), then
  // counts what each covers. Called once, by the family's constructor.
  void build_components(std::vector<Component> components, const std::function<void()>& declare);
  // The blocks in model order (the family owns them); builds the trunk.
  void set_blocks(std::vector<TrunkBlock*> blocks);
  // Evaluation of the input stage and the blocks (whole span): returns the
  // last block's output, kept in `trunk`.
  const Tensor& evaluate_trunk(const Tensor& inputs, TrunkContext& trunk);
  // The accuracies an image classifier of `classes` classes counts
  // (accuracy_top_k): top-1, and top-5 where there are at least 10 classes.
  static std::vector<int> classifier_top_k(int64_t classes);
  // Refuses `call` unless the model is set to the whole span.
  void check_whole(const char* call) const;
  // Drops what a training forward of `micro_batch` kept.
  void drop_micro_batch(int micro_batch) { in_flight_.erase(micro_batch); }

  ModelLayout layout_;
  std::vector<Component> components_;
  std::vector<SublayerParam> sublayer_params_;  // the family's declarations fill it
  ParameterSet params_;
  std::unique_ptr<Trunk> trunk_;
  ParamHooks hooks_;
  Allocator* alloc_ = nullptr;
  DType dtype_ = DType::f32;
  StageSpan stage_;

 private:
  struct MicroBatch {
    std::unique_ptr<StageContext> input;  // the input stage's (first stage)
    std::optional<HeadContext> head;      // the output stage's (last stage)
    TrunkContext trunk;
  };
  // The stage's forward; forward() is this on the whole span with nothing received.
  double run_stage(const Tensor& inputs, const Tensor& targets, OwnedTensor received, bool train,
                   int micro_batch);

  std::map<int, MicroBatch> in_flight_;
  int64_t valid_targets_ = 0;
  std::vector<int64_t> top_k_correct_;  // [accuracy_top_k() or evaluation_top_k()] of the latest loss
};

}  // namespace sdp
