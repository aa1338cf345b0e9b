#pragma once
// Pipeline schedules as data: per stage, the ordered list of compute actions
// that stage runs for one step of M micro-batches. Sends and receives are not
// listed; they are implied by the dependencies between adjacent stages:
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
// Generators (make_schedule, by name) build the usual schedules; validate()
// refuses a schedule that misses or repeats an action or deadlocks; the
// simulator (schedule_simulator.h) times one.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sdp::pipeline {

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

// "F3", "B0", "I2", "W7".
std::string to_string(const Action& action);
// The inverse of to_string; fails naming the text and the valid forms.
Action parse_action(const std::string& text);

struct Schedule {
  int microbatches = 0;
  std::vector<std::vector<Action>> stages;  // [P][actions of that stage, in order]
  int num_stages() const { return static_cast<int>(stages.size()); }
};

// Names make_schedule accepts: gpipe, 1f1b, gpipe-2bp, 1f1b-2bp, zb-h1.
const std::vector<std::string>& schedule_names();

// The named schedule for `stages` stages and `microbatches` micro-batches:
// - gpipe: every F in order, then every B in order;
// - 1f1b: P-1-s forwards of warm-up on stage s, then one F and one B in turn,
//   then the remaining B (cool-down); at most P - s activation sets live;
// - gpipe-2bp, 1f1b-2bp: the same with I in place of each B and every W at
//   the end of the step, in micro-batch order;
// - zb-h1: Zero Bubble H1. Built by list scheduling at unit cost (F = I = W):
//   whenever a stage is free it runs the next I if its gradient has arrived
//   (to unblock the stage before it), else the next F if its input has
//   arrived and fewer than P - s micro-batches hold activations (1F1B's
//   peak; a micro-batch holds them from its F until its W), else the oldest
//   pending W. W thus fills the waits that 1F1B spends idle, and I, being
//   shorter than B, sends the gradient upstream sooner. Under this memory
//   model (a set lives until W) the cap forces each W soon after its I; the
//   published ZB-H1 defers W further by counting I as freeing most of the
//   set, which this layer does not model. At uniform cost its step is
//   3M + 2(P-1) against 1F1B's 3(M + P - 1).
// Fails for an unknown name (listing the valid ones) or counts below 1.
Schedule make_schedule(const std::string& name, int stages, int microbatches);

// Refuses (sdp::Error naming stage, action index, action and why) a schedule
// where a stage lacks or repeats F(mb), has neither B(mb) nor both I(mb) and
// W(mb) exactly once, mixes B with I/W for a micro-batch, runs W before I or
// B/I before F on the stage, names a micro-batch outside [0, M), or whose
// blocking execution (each stage runs its list in order, each action waiting
// for its dependencies) deadlocks; the deadlock error names each stuck
// stage's first waiting action and what it waits for.
void validate(const Schedule& schedule);

// {"microbatches": M, "stages": [["F0", "F1", "B0", ...], ...]}. On reading,
// "microbatches" may be left out: it is then one more than the largest
// micro-batch named. Reading does not validate.
nlohmann::json to_json(const Schedule& schedule);
Schedule schedule_from_json(const nlohmann::json& j);
void save_schedule(const Schedule& schedule, const std::string& path);
Schedule load_schedule(const std::string& path);

// The dependencies of the action at stages[stage][index], as (stage, action)
// pairs; a B/I dependency on a neighbour is given as whichever of B or I that
// stage lists for the micro-batch. Shared by the validator and the simulator.
struct Dependency {
  int stage = 0;
  Action action;
  bool cross_stage = false;  // arrives over one hop (pays the comm latency)
};
std::vector<Dependency> dependencies(const Schedule& schedule, int stage, const Action& action);

}  // namespace sdp::pipeline
