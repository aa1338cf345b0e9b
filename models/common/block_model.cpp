#include "models/common/block_model.h"

#include <limits>
#include <set>
#include <utility>

#include "kernels/ops.h"
#include "models/common/component_groups.h"
#include "models/common/stage_checks.h"

namespace sdp {

void BlockModel::build_components(std::vector<Component> components,
                                  const std::function<void()>& declare) {
  components_ = std::move(components);
  place_components(components_, layout_, params_);
  declare();
  count_component_numel(components_, params_);
}

std::vector<int> BlockModel::classifier_top_k(int64_t classes) {
  return classes >= 10 ? std::vector<int>{1, 5} : std::vector<int>{1};
}

void BlockModel::set_blocks(std::vector<TrunkBlock*> blocks) {
  trunk_ = std::make_unique<Trunk>(params_, std::move(blocks));
  trunk_->set_hooks(&hooks_);
}

void BlockModel::materialize(Allocator& alloc, DType dtype, const std::vector<bool>& held,
                             const std::vector<bool>& trained,
                             const std::vector<WholeStorage>& storage) {
  alloc_ = &alloc;
  dtype_ = dtype;
  params_.materialize(alloc, dtype, held, trained, storage);
  materialize_constants();
  in_flight_.clear();
}

std::vector<int> BlockModel::site_params(int site) const {
  if (site < 0 || site >= site_count())
    fail("site ", site, " is not a site of model ", name(), " (valid: 0 .. ", site_count() - 1,
         ")");
  if (site == 0) return input_site_params();
  if (site == site_count() - 1) return output_site_params();
  std::vector<int> ids;
  for (int id : trunk_->blocks()[static_cast<size_t>(site - 1)]->param_ids())
    if (id >= 0) ids.push_back(id);
  return ids;
}

void BlockModel::set_stage(const StageSpan& span) {
  const int L = block_count();
  check_stage_span(span, L, name());
  check_no_micro_batch_in_flight(in_flight_.size(), name());
  stage_ = span;
  trunk_->set_block_range(span.first_block, span.end(L));
}

void BlockModel::check_whole(const char* call) const {
  check_whole_stage(stage_, block_count(), call, name());
}

Shape BlockModel::stage_input_shape(const Tensor& inputs, int first_block) const {
  check_later_stage_start(first_block, block_count(), name());
  return block_input_shape(inputs, first_block);
}

const Tensor& BlockModel::evaluate_trunk(const Tensor& inputs, TrunkContext& trunk) {
  enter_trunk(0, /*train=*/false, /*backward=*/false);
  std::unique_ptr<StageContext> none;
  OwnedTensor x0 = input_forward(inputs, /*train=*/false, none);
  const Tensor& out = trunk_->forward(trunk, std::move(x0), false, false, *alloc_);
  leave_trunk();
  return out;
}

double BlockModel::forward(const Tensor& inputs, const Tensor& targets, bool keep_for_backward,
                           int micro_batch) {
  check_whole(keep_for_backward ? "forward()" : "forward(keep_for_backward = false)");
  return run_stage(inputs, targets, OwnedTensor(), keep_for_backward, micro_batch);
}

double BlockModel::forward_stage(const Tensor& inputs, const Tensor& targets, OwnedTensor received,
                                 int micro_batch) {
  return run_stage(inputs, targets, std::move(received), true, micro_batch);
}

double BlockModel::run_stage(const Tensor& inputs, const Tensor& targets, OwnedTensor received,
                             bool train, int micro_batch) {
  SDP_CHECK(alloc_, "materialize() the model before forward()");
  const int L = block_count();
  const bool first = stage_.has_input_stage(), last = stage_.has_output_stage(L);
  Shape targets_shape;
  if (first) {
    SDP_CHECK(!received, "forward: the first stage of model ", name(),
              " runs its input stage and receives nothing, got ", received->describe());
    targets_shape = check_inputs(inputs);
  } else {
    SDP_CHECK(received, "forward_stage: stage ", stage_.describe(L), " of model ", name(),
              " needs the previous stage's output (the input of block ", stage_.first_block, ")");
    targets_shape = check_received(*received);
    expect_dtype(*received, dtype_, "forward_stage", "received");
  }
  if (last) {
    expect_shape(targets, targets_shape, "forward", targets_word());
    expect_dtype(targets, DType::i32, "forward", targets_word());
  }
  // A new training forward of a micro-batch replaces what it kept before.
  if (train) in_flight_.erase(micro_batch);

  MicroBatch m;
  enter_trunk(micro_batch, train, /*backward=*/false);
  // On a later stage the received stream is the trunk's input, kept until
  // its first block's backward.
  const bool keep_input = first && train && input_backward_reads_output();
  OwnedTensor x0 = first ? input_forward(inputs, train, m.input) : std::move(received);
  const Tensor& out = trunk_->forward(m.trunk, std::move(x0), train, keep_input, *alloc_);
  leave_trunk();
  if (!train) m.input.reset();  // what an evaluation's input stage kept through the blocks
  if (!last) {
    // Non-last stages are training stages only (check_whole refuses evaluation).
    in_flight_.emplace(micro_batch, std::move(m));
    return 0;
  }

  HeadContext h;
  h.targets = targets.view({targets.numel()});
  output_forward(out, train, h);
  const int64_t rows = h.logits->size(0);
  const DType st = accum_dtype(dtype_);  // statistics and losses
  h.lse = OwnedTensor(*alloc_, {rows}, st, MemCategory::activation);  // [rows]
  OwnedTensor losses(*alloc_, {rows}, st, MemCategory::workspace);    // [rows]
  ops::cross_entropy_forward(*h.logits, h.targets, *losses, *h.lse);

  double total = 0;
  if (targets.device() == Device::meta) {
    total = std::numeric_limits<double>::quiet_NaN();
    valid_targets_ = rows;
  } else {
    // One reduction each, on the device that holds them (one read-back on CUDA).
    valid_targets_ = ops::count_nonnegative(targets);
    total = ops::sum(*losses);
  }
  // Before backward turns the logits into their gradient.
  const std::vector<int> ks = train ? accuracy_top_k() : evaluation_top_k();
  top_k_correct_.assign(ks.size(), 0);
  if (!ks.empty()) ops::count_top_k(*h.logits, h.targets, ks, top_k_correct_);
  if (train) {
    trim_head(h);
    m.head = std::move(h);
    in_flight_.emplace(micro_batch, std::move(m));
  }
  return total;
}

const Tensor& BlockModel::stage_output(int micro_batch) const {
  check_hands_on(stage_, block_count(), name());
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && !it->second.trunk.backward_started,
            "stage_output of micro-batch ", micro_batch,
            " without its stage forward (or after its backward)");
  return it->second.trunk.output();
}

void BlockModel::backward(double loss_scale, bool split_weight_grads, const GradsReady& ready,
                          int micro_batch) {
  check_whole("backward()");
  backward_stage(OwnedTensor(), loss_scale, split_weight_grads, ready, micro_batch);
}

OwnedTensor BlockModel::backward_stage(OwnedTensor output_grad, double loss_scale,
                                       bool split_weight_grads, const GradsReady& ready,
                                       int micro_batch) {
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && !it->second.trunk.backward_started,
            "backward() of micro-batch ", micro_batch,
            " without a preceding training forward() of it");
  SDP_CHECK(params_.has_grads(), "backward() needs allocated gradients (allocate_grads())");
  MicroBatch& m = it->second;
  const int L = block_count();
  const bool first = stage_.has_input_stage(), last = stage_.has_output_stage(L);
  OwnedTensor dy;  // the gradient of the trunk's output entry
  if (last) {
    SDP_CHECK(!output_grad, "backward_stage: the last stage starts from its loss; got an output ",
              "gradient ", output_grad->describe());
    HeadContext& h = *m.head;
    // The logits' storage becomes their gradient: no second buffer.
    ops::cross_entropy_backward_input(*h.logits, h.targets, *h.lse, loss_scale, *h.logits);
    dy = output_backward(h, m.trunk.output(), ready);
    m.head.reset();
  } else {
    SDP_CHECK(output_grad, "backward_stage: stage ", stage_.describe(L),
              " needs the next stage's gradient of its output");
    expect_shape(*output_grad, m.trunk.output().shape(), "backward_stage", "output_grad");
    expect_dtype(*output_grad, dtype_, "backward_stage", "output_grad");
    dy = std::move(output_grad);
  }

  enter_trunk(micro_batch, /*train=*/true, /*backward=*/true);
  dy = trunk_->backward(m.trunk, std::move(dy), split_weight_grads, ready, *alloc_);
  leave_trunk();
  OwnedTensor dx;  // the gradient of what this stage received (none on the first)
  if (first)
    input_backward(m.input, std::move(dy), m.trunk, ready);
  else
    dx = std::move(dy);
  if (!split_weight_grads) in_flight_.erase(it);
  return dx;
}

void BlockModel::backward_weight(const GradsReady& ready, int micro_batch) {
  auto it = in_flight_.find(micro_batch);
  SDP_CHECK(it != in_flight_.end() && it->second.trunk.backward_started,
            "backward_weight() of micro-batch ", micro_batch,
            " needs backward(split_weight_grads = true) of it first");
  trunk_->backward_weight(it->second.trunk, ready, *alloc_);
  in_flight_.erase(it);
}

void BlockModel::backward_weight_batched(const std::vector<int>& micro_batches,
                                         const GradsReady& ready) {
  std::vector<TrunkContext*> ctxs;
  std::set<int> seen;
  for (const int mb : micro_batches) {
    SDP_CHECK(seen.insert(mb).second, "backward_weight_batched(): micro-batch ", mb,
              " listed twice");
    auto it = in_flight_.find(mb);
    SDP_CHECK(it != in_flight_.end() && it->second.trunk.backward_started,
              "backward_weight_batched() of micro-batch ", mb,
              " needs backward(split_weight_grads = true) of it first");
    ctxs.push_back(&it->second.trunk);
  }
  trunk_->backward_weight_batched(ctxs, ready, *alloc_);
  for (int mb : micro_batches) in_flight_.erase(mb);
}

}  // namespace sdp
