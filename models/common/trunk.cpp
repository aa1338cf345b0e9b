#include "models/common/trunk.h"

#include <utility>

namespace sdp {

bool TrunkContext::has_pending_weights() const {
  for (bool p : weights_pending)
    if (p) return true;
  return false;
}

const Tensor& TrunkContext::input() const {
  SDP_CHECK(!stream.empty() && stream.front(), "the trunk's input is no longer kept");
  return *stream.front();
}

const Tensor& TrunkContext::output() const {
  SDP_CHECK(!stream.empty() && stream.back(), "the trunk's output is no longer kept");
  return *stream.back();
}

Trunk::Trunk(const ParameterSet& params, std::vector<TrunkBlock*> blocks)
    : params_(params), blocks_(std::move(blocks)) {}

void Trunk::needed(const TrunkBlock& b, ParamPass pass) const {
  if (hooks_) hooks_->call_needed(b.index() + 1, pass);
}

void Trunk::done(const TrunkBlock& b, ParamPass pass) const {
  if (hooks_) hooks_->call_done(b.index() + 1, pass);
}

const Tensor& Trunk::forward(TrunkContext& ctx, OwnedTensor x0, bool train, bool keep_input,
                             Allocator& alloc) const {
  SDP_CHECK(ctx.empty(), "the trunk's forward needs a fresh context");
  ctx.stream.push_back(std::move(x0));
  for (size_t i = 0; i < blocks_.size(); ++i) {
    TrunkBlock& block = *blocks_[i];
    // B-SDP: the residual stream passes an unheld block; a pipeline stage
    // passes every block outside its range.
    if (!block.runs() || !in_range(block.index())) continue;
    needed(block, ParamPass::forward);
    TrunkBlock::Forward f =
        block.forward(*ctx.stream.back(), train ? BlockMode::train : BlockMode::eval, alloc);
    done(block, ParamPass::forward);
    if (!train) {
      // Evaluation keeps only the newest entry: the input is freed once the
      // output exists (as the block itself frees what it computed on).
      f.saved.reset();
      ctx.stream.back() = std::move(f.y);
      continue;
    }
    // A checkpointed block keeps only its input, which the stream holds.
    if (checkpointed(block.index())) f.saved.reset();
    ctx.ran.push_back(i);
    ctx.saved.push_back(std::move(f.saved));
    ctx.weights_pending.push_back(false);
    ctx.stream.push_back(std::move(f.y));
  }
  if (!train) return *ctx.stream.back();

  // Who still needs each entry: the block it feeds (through its backward),
  // the block that wrote it when its backward reads its output, the
  // caller's output stage (the last entry, until backward starts) and the
  // caller's input stage (the first, when pinned).
  const size_t n = ctx.ran.size();
  ctx.users.assign(n + 1, 0);
  for (size_t k = 0; k < n; ++k) ++ctx.users[k];
  for (size_t k = 1; k <= n; ++k)
    if (blocks_[ctx.ran[k - 1]]->backward_reads_output()) ++ctx.users[k];
  ++ctx.users[n];
  if (keep_input) {
    ++ctx.users[0];
    ctx.input_pinned = true;
  }
  return *ctx.stream.back();
}

OwnedTensor Trunk::backward(TrunkContext& ctx, OwnedTensor dy, bool split_weight_grads,
                            const GradsReady& ready, Allocator& alloc) const {
  SDP_CHECK(!ctx.empty() && !ctx.users.empty(), "the trunk's backward needs a training forward");
  SDP_CHECK(!ctx.backward_started, "the trunk's backward ran already for this micro-batch");
  ctx.backward_started = true;
  const size_t n = ctx.ran.size();
  release_user(ctx, n);  // the output stage is done with the last entry
  for (size_t r = n; r-- > 0;) {
    TrunkBlock& block = *blocks_[ctx.ran[r]];
    needed(block, ParamPass::backward);
    if (!ctx.saved[r]) {
      // Checkpointed: rebuild the context from the kept input. The output
      // computed again equals the stream's (same ops, same input) and is
      // dropped at once.
      TrunkBlock::Forward f = block.forward(*ctx.stream[r], BlockMode::recompute, alloc);
      f.y = OwnedTensor();
      SDP_CHECK(f.saved, "block ", block.index(), ": a recompute forward saved nothing");
      ctx.saved[r] = std::move(f.saved);
    }
    const bool trained = block.trains();
    const bool reads_output = block.backward_reads_output();
    const Tensor* y = reads_output ? &*ctx.stream[r + 1] : nullptr;
    dy = block.backward_input(*ctx.saved[r], *ctx.stream[r], y, std::move(dy), trained, alloc);
    done(block, ParamPass::backward);
    if (reads_output) release_user(ctx, r + 1);
    if (trained && split_weight_grads) {
      ctx.weights_pending[r] = true;
      continue;
    }
    if (trained) block.backward_weight(*ctx.saved[r], *ctx.stream[r], alloc);
    ctx.saved[r].reset();
    release_user(ctx, r);
    if (trained) report(block, ready);
  }
  return dy;
}

void Trunk::backward_weight(TrunkContext& ctx, const GradsReady& ready, Allocator& alloc) const {
  for (size_t r = ctx.ran.size(); r-- > 0;) {
    if (!ctx.weights_pending[r]) continue;
    TrunkBlock& block = *blocks_[ctx.ran[r]];
    block.backward_weight(*ctx.saved[r], *ctx.stream[r], alloc);
    ctx.saved[r].reset();
    ctx.weights_pending[r] = false;
    release_user(ctx, r);
    report(block, ready);
  }
}

void Trunk::backward_weight_batched(const std::vector<TrunkContext*>& ctxs,
                                    const GradsReady& ready, Allocator& alloc) const {
  // Micro-batches of one stage run the same blocks (the held ones in the
  // stage's range); contexts that do not are done one at a time.
  bool same_blocks = true;
  for (const TrunkContext* c : ctxs) same_blocks = same_blocks && c->ran == ctxs.front()->ran;
  if (ctxs.size() < 2 || !same_blocks) {
    for (TrunkContext* c : ctxs) backward_weight(*c, ready, alloc);
    return;
  }
  std::vector<BlockContext*> saved;
  std::vector<const Tensor*> inputs;
  std::vector<TrunkContext*> pending;
  for (size_t r = ctxs.front()->ran.size(); r-- > 0;) {
    saved.clear();
    inputs.clear();
    pending.clear();
    for (TrunkContext* c : ctxs) {
      if (!c->weights_pending[r]) continue;
      saved.push_back(c->saved[r].get());
      inputs.push_back(&*c->stream[r]);
      pending.push_back(c);
    }
    if (pending.empty()) continue;
    TrunkBlock& block = *blocks_[ctxs.front()->ran[r]];
    block.backward_weight_batched(saved, inputs, alloc);
    for (TrunkContext* c : pending) {
      c->saved[r].reset();
      c->weights_pending[r] = false;
      release_user(*c, r);
    }
    for (size_t k = 0; k < pending.size(); ++k) report(block, ready);
  }
}

void Trunk::release_input(TrunkContext& ctx) const {
  if (!ctx.input_pinned) return;
  ctx.input_pinned = false;
  release_user(ctx, 0);
}

void Trunk::release_user(TrunkContext& ctx, size_t entry) const {
  SDP_CHECK(entry < ctx.users.size() && ctx.users[entry] > 0, "trunk stream entry ", entry,
            " released more often than it is used");
  if (--ctx.users[entry] == 0) ctx.stream[entry] = OwnedTensor();
}

void Trunk::report(const TrunkBlock& block, const GradsReady& ready) const {
  params_.report_trained(block.param_ids(), ready);
}

}  // namespace sdp
