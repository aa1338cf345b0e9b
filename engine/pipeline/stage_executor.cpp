#include "engine/pipeline/stage_executor.h"

#include <chrono>
#include <map>
#include <memory>

#include "engine/core/error.h"
#include "engine/core/memory_stats.h"
#include "kernels/ops.h"

namespace sdp::pipeline {

StageExecutor::StageExecutor(Model& model, Schedule schedule, int stage, comm::Communicator* pipe,
                             DeferredWeightGrads weight_grads)
    : model_(model),
      schedule_(std::move(schedule)),
      stage_(stage),
      pipe_(pipe),
      weight_grads_(weight_grads) {
  const int P = schedule_.num_stages();
  SDP_CHECK(stage_ >= 0 && stage_ < P, "stage ", stage_, " of a ", P, "-stage schedule");
  SDP_CHECK(P == 1 || (pipe_ && pipe_->size() == P && pipe_->rank() == stage_),
            "a ", P, "-stage pipeline needs a pipeline communicator of ", P,
            " ranks on which this stage is rank ", stage_);
}

Schedule StageExecutor::one_stage(int microbatches) {
  Schedule s;
  s.microbatches = microbatches;
  s.stages.resize(1);
  for (int mb = 0; mb < microbatches; ++mb) {
    s.stages[0].push_back({ActionKind::forward, mb});
    s.stages[0].push_back({ActionKind::backward, mb});
  }
  return s;
}

StageStepResult StageExecutor::run(const std::vector<MicroBatchData>& batches, double loss_scale,
                                   const GradsReady& ready) {
  const int M = schedule_.microbatches;
  SDP_CHECK(static_cast<int>(batches.size()) == M, "pipeline step: ", batches.size(),
            " micro-batches given for a schedule of ", M);
  StepHooks hooks;
  hooks.ready = ready;
  return run([&](int mb) -> const MicroBatchData& { return batches[static_cast<size_t>(mb)]; },
             loss_scale, hooks);
}

StageStepResult StageExecutor::run(const MicroBatchFeed& feed, double loss_scale,
                                   const StepHooks& hooks) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto now = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const int P = schedule_.num_stages();
  const std::vector<Action>& actions = schedule_.stages[static_cast<size_t>(stage_)];
  // The stage's last action that writes weight gradients (B or W).
  size_t last_weight_grads = actions.size();
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].kind == ActionKind::backward || actions[i].kind == ActionKind::weight_grad)
      last_weight_grads = i;
  MemoryStats& mem = model_.allocator().stats();
  const Device device = model_.allocator().device();
  Allocator& alloc = model_.allocator();
  const int first_block = model_.stage().first_block;
  // An emulated rank's peers are absent and its receives move nothing:
  // zeros then stand in for their data, so the stage computes on finite
  // values rather than on whatever the fresh buffer held.
  const bool emulated = pipe_ && !pipe_->moves_data();
  auto receive = [&](Tensor& buffer, int peer) {
    if (emulated && device != Device::meta) ops::fill(buffer, 0.0);
    pipe_->recv(buffer, peer);
  };

  StageStepResult r;
  r.top_k_correct.assign(model_.accuracy_top_k().size(), 0);
  // Per micro-batch, what moves between actions of this stage.
  std::map<int, OwnedTensor> received;      // RECV_F -> F
  std::map<int, OwnedTensor> output_grads;  // RECV_B -> B / I
  std::map<int, OwnedTensor> input_grads;   // B / I -> SEND_B, then kept until the end
  std::map<int, std::unique_ptr<comm::PendingCollective>> activation_sends;  // SEND_F -> B / I
  std::vector<std::unique_ptr<comm::PendingCollective>> gradient_sends;
  auto take = [](std::map<int, OwnedTensor>& from, int mb, const char* what) {
    auto it = from.find(mb);
    SDP_CHECK(it != from.end(), "pipeline step: ", what, " of micro-batch ", mb,
              " is not here (the schedule is not in explicit form?)");
    OwnedTensor t = std::move(it->second);
    from.erase(it);
    return t;
  };

  // Batched deferred weight gradients: where each run of W actions ends,
  // keyed by its first index (runs of one included: they run as W does).
  std::map<size_t, size_t> weight_runs;
  if (weight_grads_ == DeferredWeightGrads::batched)
    for (const auto& [begin, end] : weight_grad_runs(actions)) weight_runs[begin] = end;

  for (size_t index = 0; index < actions.size(); ++index) {
    const Action& a = actions[index];
    if (auto run = weight_runs.find(index); run != weight_runs.end() && run->second > index + 1) {
      const size_t end = run->second;
      std::vector<int> mbs;
      for (size_t k = index; k < end; ++k) mbs.push_back(actions[k].microbatch);
      const bool last = last_weight_grads >= index && last_weight_grads < end;
      PhaseScope phase(mem, Phase::backward);
      const double start = now();
      if (hooks.before) hooks.before(a, last);
      model_.backward_weight_batched(mbs, hooks.ready);
      if (hooks.after) hooks.after(actions[end - 1], last);
      ops::synchronize(device);
      const double stop = now();
      // One computation for the run: each W gets an equal share of its time.
      const double share = (stop - start) / static_cast<double>(end - index);
      auto boundary = [&](size_t k) {  // where the k-th W of the run starts
        return k == end ? stop : start + share * static_cast<double>(k - index);
      };
      for (size_t k = index; k < end; ++k) r.timings.push_back({boundary(k), boundary(k + 1)});
      r.busy_seconds += stop - start;
      index = end - 1;
      continue;
    }
    const int mb = a.microbatch;
    // A forward's batch is fetched first, outside its memory phase (a
    // loader's buffers are not the forward's).
    const MicroBatchData* batch = a.kind == ActionKind::forward ? &feed(mb) : nullptr;
    const bool forward_side = a.kind == ActionKind::forward ||
                              a.kind == ActionKind::recv_activation ||
                              a.kind == ActionKind::send_activation;
    PhaseScope phase(mem, forward_side ? Phase::forward : Phase::backward);
    const bool last = index == last_weight_grads;
    const bool compute = runs_compute(a.kind);
    const double start = now();
    if (compute && hooks.before) hooks.before(a, last);
    // Communication actions read at most the shapes of the micro-batch.
    auto data = [&]() -> const MicroBatchData& { return feed(mb); };
    switch (a.kind) {
      case ActionKind::recv_activation: {
        OwnedTensor x(alloc, model_.stage_input_shape(data().inputs, first_block), model_.dtype(),
                      MemCategory::activation);
        receive(*x, stage_ - 1);
        received[mb] = std::move(x);
        break;
      }
      case ActionKind::forward: {
        OwnedTensor x = stage_ > 0 ? take(received, mb, "the received activation") : OwnedTensor();
        r.loss_sum += model_.forward_stage(batch->inputs, batch->targets, std::move(x), mb);
        if (stage_ == P - 1) {
          r.valid_targets += model_.valid_targets();
          const std::vector<int64_t> correct = model_.top_k_correct();
          for (size_t i = 0; i < correct.size(); ++i) r.top_k_correct[i] += correct[i];
        }
        break;
      }
      case ActionKind::send_activation: {
        const Tensor& y = model_.stage_output(mb);
        activation_sends[mb] = pipe_->send_async(y, stage_ + 1);
        r.activation_bytes_sent += static_cast<int64_t>(y.bytes());
        break;
      }
      case ActionKind::recv_grad: {
        const Tensor& y = model_.stage_output(mb);
        OwnedTensor dy(alloc, y.shape(), y.dtype(), MemCategory::activation);
        receive(*dy, stage_ + 1);
        output_grads[mb] = std::move(dy);
        break;
      }
      case ActionKind::backward:
      case ActionKind::input_grad: {
        OwnedTensor dy;
        if (stage_ < P - 1) {
          dy = take(output_grads, mb, "the output gradient");
          // The output entry is freed by the backward: its send must be done.
          auto send = activation_sends.find(mb);
          if (send != activation_sends.end()) {
            send->second->wait();
            activation_sends.erase(send);
          }
        }
        OwnedTensor dx = model_.backward_stage(std::move(dy), loss_scale,
                                               a.kind == ActionKind::input_grad, hooks.ready, mb);
        if (stage_ > 0) input_grads[mb] = std::move(dx);
        break;
      }
      case ActionKind::send_grad: {
        auto it = input_grads.find(mb);
        SDP_CHECK(it != input_grads.end(), "pipeline step: SEND_B of micro-batch ", mb,
                  " before its backward");
        gradient_sends.push_back(pipe_->send_async(*it->second, stage_ - 1));
        r.gradient_bytes_sent += static_cast<int64_t>(it->second->bytes());
        break;
      }
      case ActionKind::weight_grad:
        model_.backward_weight(hooks.ready, mb);
        break;
    }
    if (compute && hooks.after) hooks.after(a, last);
    // Device work is queued asynchronously: an action ends when it has run.
    ops::synchronize(device);
    const double end = now();
    r.timings.push_back({start, end});
    if (compute) r.busy_seconds += end - start;
  }
  for (auto& [mb, send] : activation_sends) send->wait();
  for (auto& send : gradient_sends) send->wait();
  return r;
}

}  // namespace sdp::pipeline
