#pragma once
// Pipeline schedules as data: per stage, the ordered list of actions that
// stage runs for one step of M micro-batches. A schedule comes in one of two
// forms.
//
// Implicit form (what the generators build): compute actions only; sends
// and receives are implied by the dependencies between adjacent stages:
// - F(mb) on stage s > 0 needs F(mb) on stage s - 1 (its activations);
// - B(mb) or I(mb) on stage s < P - 1 needs B(mb) or I(mb) on stage s + 1
//   (the input gradient of the stage after it);
// - B(mb) or I(mb) on any stage needs F(mb) on that stage (on the last stage
//   this is the only dependency; elsewhere it also follows from the others);
// - W(mb) needs I(mb) on the same stage.
// B is the whole backward of a micro-batch; two-stage backward (2BP) splits it
// into I, the input gradient (sent upstream at once), and W, the weight
// gradient, which has no consumer within the step and can fill bubbles.
//
// Explicit form (what an executor runs; with_communication() lowers the
// implicit form to it): every stage also lists each send and receive, at
// the point where it runs. Sends are asynchronous: a send waits only for
// the action that computed what it sends, never for its receiver, so two
// stages sending to each other cannot block each other. Receives block
// until the matching send has run. Dependencies:
// - RECV_F(mb) on s needs SEND_F(mb) on s - 1; F(mb) on s > 0 needs
//   RECV_F(mb) on s; SEND_F(mb) on s < P - 1 needs F(mb) on s;
// - RECV_B(mb) on s needs SEND_B(mb) on s + 1; B or I(mb) on s < P - 1 needs
//   RECV_B(mb) on s (and F(mb) on s); SEND_B(mb) on s > 0 needs B or I(mb)
//   on s;
// - W(mb) needs I(mb) on the same stage.
// A schedule lists either no communication or all of it; validate() refuses
// a mix.
//
// Generators (make_schedule, by name) build the usual schedules; validate()
// refuses a schedule that misses or repeats an action or deadlocks; the
// simulator (schedule_simulator.h) times one.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/config_limits.h"

namespace sdp::pipeline {

// The largest schedule any tool builds, reads or checks: the limits of
// sdp-train's pipeline_stages and grad_accum (its micro-batches), and of
// their product, so that a schedule's lists and the validator's and
// simulator's tables (a few words per stage and micro-batch) stay within a
// few hundred MB. check_counts' message names each.
inline constexpr int kMaxStages = static_cast<int>(config_limits::kPipelineStages);
inline constexpr int kMaxMicrobatches = static_cast<int>(config_limits::kGradAccum);
inline constexpr int64_t kMaxStageMicrobatches = int64_t{1} << 22;  // stages x micro-batches

// Compute actions, then the communication a schedule may list explicitly:
// send_activation (SEND_F: this stage's forward output of the micro-batch to
// the next stage), recv_activation (RECV_F: from the previous stage),
// send_grad (SEND_B: the input gradient from B or I to the previous stage),
// recv_grad (RECV_B: from the next stage). Text forms "SEND_F3" etc.
enum class ActionKind : uint8_t {
  forward, backward, input_grad, weight_grad,
  send_activation, recv_activation, send_grad, recv_grad
};

struct Action {
  ActionKind kind = ActionKind::forward;
  int microbatch = 0;
  bool operator==(const Action& o) const { return kind == o.kind && microbatch == o.microbatch; }
  bool operator!=(const Action& o) const { return !(*this == o); }
};

// "F3", "B0", "I2", "W7", "SEND_F3", "RECV_F3", "SEND_B3", "RECV_B3".
std::string to_string(const Action& action);
// The inverse of to_string; fails naming the text and the valid forms.
Action parse_action(const std::string& text);

struct Schedule {
  int microbatches = 0;
  std::vector<std::vector<Action>> stages;  // [P][actions of that stage, in order]
  int num_stages() const { return static_cast<int>(stages.size()); }
};

// SEND_F, RECV_F, SEND_B and RECV_B.
bool is_communication(ActionKind kind);
// Whether the list, or any stage of the schedule, names a send or receive.
bool lists_communication(const std::vector<Action>& actions);
bool lists_communication(const Schedule& schedule);

// The explicit form of an implicit schedule: on every stage, RECV_F(mb)
// right before F(mb) (stages > 0) and SEND_F(mb) right after it (stages <
// P - 1); RECV_B(mb) right before B or I(mb) (stages < P - 1) and SEND_B(mb)
// right after it (stages > 0). The blocking order is the implicit one, so a
// valid schedule stays valid. A schedule that already lists communication
// is returned as it is (validate() judges it).
Schedule with_communication(const Schedule& schedule);

// Names make_schedule accepts: gpipe, 1f1b, gpipe-2bp, 1f1b-2bp, zb-h1,
// 1f1b-2bp-cooldown, naive, naive-2bp.
const std::vector<std::string>& schedule_names();

// The named schedule for `stages` stages and `microbatches` micro-batches:
// - gpipe: every F in order, then every B in order;
// - 1f1b: P-1-s forwards of warm-up on stage s, then one F and one B in turn,
//   then the remaining B (cool-down); at most P - s activation sets live;
// - gpipe-2bp, 1f1b-2bp: the same with I in place of each B and every W at
//   the end of the step, in micro-batch order;
// - zb-h1: Zero Bubble H1 (Qi et al., 2023): warm-up forwards as 1F1B,
//   then F and I in 1F1B's order, each W deferred into a place where 1F1B
//   would idle (waiting for a gradient), the remaining Ws at the end. Built
//   by list scheduling at unit cost (F = I = W): whenever a stage is free it
//   runs the next I if its gradient has arrived (to unblock the stage
//   before it), else the next F if its input has arrived and fewer than
//   P - s micro-batches are in flight, else the oldest pending W. A
//   micro-batch is in flight from its F until its I: after I only the
//   state W needs is left, smaller than the activations (the simulator's
//   byte accounting says how much), so 1F1B's peak of P - s in flight is
//   kept while W waits. At uniform cost (F = I = W = 1, B = 2) the step is
//   3M + (P-1) against 1F1B's 3(M + P - 1): the bubble (P-1)(F + I - W) of
//   the paper, a third of 1F1B's (P-1)(F + I + W).
// - 1f1b-2bp-cooldown: 1f1b-2bp's F and I in 1F1B's order on every stage,
//   with the deferred W spent in the cool-down's bubbles micro-batch by
//   micro-batch, as the 2BP authors do: once a stage has issued all its
//   forwards, whenever its next I's gradient has not arrived it runs its
//   oldest pending W; the Ws still pending follow its last I (one run,
//   which --deferred-weight-grads batched computes as one batched W).
//   Built by list scheduling at unit cost (F = I = W), no latency, as
//   zb-h1; unlike zb-h1 nothing moves in warm-up and steady state, so
//   memory stays 1f1b-2bp's.
// - naive: no pipelining (the 2BP paper's baseline): every stage runs F(mb)
//   then B(mb) in turn, so one micro-batch is in the pipeline at a time;
//   naive-2bp: the same with I in place of each B and every W at the end.
// Fails for an unknown name (listing the valid ones) or counts below 1.
Schedule make_schedule(const std::string& name, int stages, int microbatches);

// Refuses (sdp::Error naming stage, action index, action and why) a schedule
// with counts outside [1, kMaxStages] stages, [1, kMaxMicrobatches]
// micro-batches or more than kMaxStageMicrobatches of both, where a stage
// lacks or repeats F(mb), has neither B(mb) nor both I(mb) and
// W(mb) exactly once, mixes B with I/W for a micro-batch, runs W before I or
// B/I before F on the stage, names a micro-batch outside [0, M), mixes the
// implicit and explicit forms, or (explicit form) lacks or repeats a send or
// receive its stage needs, lists one its stage cannot have (SEND_F on the
// last stage, RECV_F on the first, SEND_B on the first, RECV_B on the
// last), runs a send before what it sends or a receive after what reads it,
// or whose blocking execution (each stage runs its list in order, each
// action waiting for its dependencies; sends wait for nothing but what they
// send) deadlocks, e.g. a cycle of receives before the sends that would
// answer them (the deadlock error names each stuck stage's first waiting
// action and what it waits for), or that sends across a boundary in another
// micro-batch order than the neighbour receives in: messages arrive in the
// order they were sent, so in the explicit form the SEND_Fs (SEND_Bs) of a
// boundary must name the micro-batches in the order of the neighbour's
// RECV_Fs (RECV_Bs), and in the implicit form, whose sends follow each F
// (B or I) and whose receives precede it, neighbours must run their Fs (Bs
// or Is) in the same micro-batch order. So a schedule valid in the implicit
// form stays valid lowered by with_communication(), and every tool judges a
// schedule alike whichever form it checks.
// Linear in the actions (every lookup goes through ScheduleIndex).
void validate(const Schedule& schedule);

// A schedule file as every tool takes it (sdp-train's schedule = file:PATH,
// sdp-pipeline's --schedule and --compare file:PATH): load_schedule, then
// validate, so that all of them accept and refuse the same files with the
// same message. The caller checks the counts against its own settings.
Schedule load_valid_schedule(const std::string& path);

// A schedule or timeline file's "microbatches" as an int in [1,
// kMaxMicrobatches]: fails naming `what` and the value as written (an
// integer beyond int, e.g. 4294967298, is not taken modulo 2^32).
int microbatches_from_json(const nlohmann::json& value, const std::string& what);

// {"microbatches": M, "stages": [["F0", "F1", "B0", ...], ...]}. On reading,
// "microbatches" may be left out: it is then one more than the largest
// micro-batch named. Reading does not validate.
nlohmann::json to_json(const Schedule& schedule);
Schedule schedule_from_json(const nlohmann::json& j);
void save_schedule(const Schedule& schedule, const std::string& path);
Schedule load_schedule(const std::string& path);

// The dependencies of the action at stages[stage][index], as (stage, action)
// pairs, in the form the stage's own list is in (explicit when it names any
// send or receive); a dependency on B/I is given as whichever of B or I that
// stage lists for the micro-batch. Shared by the validator and the simulator.
struct Dependency {
  int stage = 0;
  Action action;
  bool cross_stage = false;  // arrives over one hop (pays the comm latency)
};
// One lookup scans the stage's list (O(actions of the stage)); passes over a
// whole schedule use ScheduleIndex::dependencies instead.
std::vector<Dependency> dependencies(const Schedule& schedule, int stage, const Action& action);

// Where each action sits in its stage's list, and each stage's form: built
// once in O(actions), so that the validator's and the simulator's passes,
// which look up every action's dependencies, stay linear in the actions
// (a scan per lookup made them quadratic: seconds at M = 16,000). Sizes
// [P][8 kinds][M] positions: the schedule's counts must be within the
// limits above (validate checks them first; the constructor refuses
// others). Actions naming a micro-batch outside [0, M) are left out, and a
// repeated action keeps its first position (validate reports both).
class ScheduleIndex {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;
  explicit ScheduleIndex(const Schedule& schedule);
  // Index of `action` in stages[stage], or kAbsent when not listed.
  uint32_t position(int stage, const Action& action) const;
  // Whether stages[stage] lists any send or receive.
  bool explicit_form(int stage) const { return explicit_[static_cast<size_t>(stage)] != 0; }
  // As the free dependencies(), in O(1).
  std::vector<Dependency> dependencies(int stage, const Action& action) const;

 private:
  const Schedule& schedule_;
  std::vector<char> explicit_;       // [P]
  std::vector<uint32_t> positions_;  // [P][8][M]: first index of (kind, mb), or kAbsent
};

}  // namespace sdp::pipeline
