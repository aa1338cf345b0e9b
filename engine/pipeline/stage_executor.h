#pragma once
// Runs one pipeline stage's share of a training step: exactly the actions
// its list in a validated schedule names, in that order, on the stage of the
// model this rank holds (Model::set_stage), exchanging activations and input
// gradients with the neighbouring stages over the replica's pipeline
// communicator (pipe rank = stage).
//
//   RECV_F(mb)  receive the previous stage's output into a fresh activation
//   F(mb)       forward_stage of micro-batch mb
//   SEND_F(mb)  send stage_output(mb) to the next stage, without waiting
//   RECV_B(mb)  receive the next stage's gradient of that output
//   B(mb)       backward_stage, input and weight gradients
//   I(mb)       backward_stage with the weight gradients deferred (2BP)
//   SEND_B(mb)  send the input gradient to the previous stage, without waiting
//   W(mb)       backward_weight of micro-batch mb; with
//               DeferredWeightGrads::batched a run of adjacent W actions
//               is one backward_weight_batched over their micro-batches
//               (deferred_weight_grads.h)
//
// Sends never block (Communicator::send_async) and receives block until
// their message is in, which is the execution model the validator proves
// free of deadlock. A sent activation is the stage's own stream entry: its
// send is waited for before the micro-batch's backward frees it. A sent
// input gradient has no later use here, but when the receiver has it is not
// known to the sender, so it is kept (activation memory, at most M
// boundary tensors) until every send of the step is waited for at its end:
// memory stays a function of the schedule alone, which the meta device then
// predicts exactly.
//
// Every action is timed (seconds from the start of run(), the device
// synchronized at its end), so a step's measured timeline sits beside the
// simulated one (schedule_simulator.h), and counted in the allocator's
// memory phase of what it computes: forward for F and its receive and
// send, backward for the rest.
//
// Every training step runs through here, pipelined or not: a job without
// a pipeline is one stage whose schedule runs its micro-batches one after
// another (F0 B0 F1 B1 ...). What the parallel strategy does around the
// compute actions (sharding's gathers and reduce-scatters, bucketed
// all-reduces) comes in through StepHooks, so that every composition runs
// the same way with and without a pipeline.
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/communicator.h"
#include "engine/pipeline/deferred_weight_grads.h"
#include "engine/pipeline/schedule.h"
#include "engine/pipeline/schedule_simulator.h"
#include "models/common/model.h"

namespace sdp::pipeline {

// One micro-batch's model inputs and targets (views that stay alive for the
// whole step). Every stage gets them: the first reads the inputs, the last
// the targets, every stage their shape.
struct MicroBatchData {
  Tensor inputs;
  Tensor targets;
};

struct StageStepResult {
  double loss_sum = 0;        // last stage: summed loss of its micro-batches; 0 elsewhere
  int64_t valid_targets = 0;  // last stage: loss terms summed
  // Last stage of a classifier: the micro-batches' top-k correct counts
  // summed, one per k of the model's accuracy_top_k(); zeros elsewhere.
  std::vector<int64_t> top_k_correct;
  std::vector<ActionTiming> timings;  // [actions of this stage], as the schedule lists them
  double busy_seconds = 0;            // inside compute actions
  int64_t activation_bytes_sent = 0;  // SEND_F payloads
  int64_t gradient_bytes_sent = 0;    // SEND_B payloads
};

// The strategy's part of a step, called around each compute action (F, B,
// I, W) of this stage. `last_weight_grads`: the action is the stage's last
// that writes weight gradients (its last B or W), after which they are
// final for the step. A batched run of W actions gets one before (with its
// first W) and one after (with its last), `last_weight_grads` true when
// the run holds the stage's last W. `ready` is handed to every B, I and W (the model
// calls it for parameters whose gradients the action made final).
struct StepHooks {
  std::function<void(const Action& action, bool last_weight_grads)> before, after;
  GradsReady ready;
};

// A step's micro-batch `mb`, asked for by the first action that reads it
// and again by later ones; micro-batches are first asked for in the order
// of the stage's forwards.
using MicroBatchFeed = std::function<const MicroBatchData&(int mb)>;

class StageExecutor {
 public:
  // `schedule`: validated, in explicit form (with_communication). `pipe`:
  // the P ranks of this rank's replica, rank s = stage s (null for P = 1).
  StageExecutor(Model& model, Schedule schedule, int stage, comm::Communicator* pipe,
                DeferredWeightGrads weight_grads = DeferredWeightGrads::per_micro_batch);

  const Schedule& schedule() const { return schedule_; }
  int stage() const { return stage_; }
  DeferredWeightGrads weight_grads() const { return weight_grads_; }

  // One step: batches[mb] for every micro-batch of the schedule.
  // loss_scale as Model::backward; `ready` hears of final weight gradients.
  StageStepResult run(const std::vector<MicroBatchData>& batches, double loss_scale,
                      const GradsReady& ready = {});
  // The same with the micro-batches from `feed` and the strategy's hooks.
  StageStepResult run(const MicroBatchFeed& feed, double loss_scale, const StepHooks& hooks);

  // A schedule for a job without a pipeline: one stage, its M micro-batches
  // one after another, each backward right after its forward.
  static Schedule one_stage(int microbatches);

 private:
  Model& model_;
  Schedule schedule_;
  int stage_ = 0;
  comm::Communicator* pipe_ = nullptr;
  DeferredWeightGrads weight_grads_ = DeferredWeightGrads::per_micro_batch;
};

}  // namespace sdp::pipeline
