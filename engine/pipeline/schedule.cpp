#include "engine/pipeline/schedule.h"

#include <algorithm>
#include <fstream>
#include <string_view>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace sdp::pipeline {

namespace {

// The text of a kind, before the micro-batch: "F", ..., "SEND_F", ...
const char* prefix(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return "F";
    case ActionKind::backward: return "B";
    case ActionKind::input_grad: return "I";
    case ActionKind::weight_grad: return "W";
    case ActionKind::send_activation: return "SEND_F";
    case ActionKind::recv_activation: return "RECV_F";
    case ActionKind::send_grad: return "SEND_B";
    case ActionKind::recv_grad: return "RECV_B";
  }
  return "?";
}

// Every kind, longest text first, so that parsing tries "SEND_F" before "F"
// could ever match a prefix of it.
constexpr ActionKind kAllKinds[] = {
    ActionKind::send_activation, ActionKind::recv_activation, ActionKind::send_grad,
    ActionKind::recv_grad,       ActionKind::forward,         ActionKind::backward,
    ActionKind::input_grad,      ActionKind::weight_grad};

std::string where(int stage, size_t index, const Action& action) {
  return format("stage ", stage, " action ", index, " (", to_string(action), ")");
}

bool lists(const std::vector<Action>& actions, const Action& action) {
  return std::find(actions.begin(), actions.end(), action) != actions.end();
}

void check_counts(int stages, int microbatches) {
  if (stages < 1 || stages > kMaxStages)
    fail("pipeline schedule: stages = ", stages, " (valid: 1 to ", kMaxStages, ")");
  if (microbatches < 1 || microbatches > kMaxMicrobatches)
    fail("pipeline schedule: microbatches = ", microbatches, " (valid: 1 to ", kMaxMicrobatches,
         ", the most micro-batches a step may have)");
  const int64_t cells = int64_t{stages} * microbatches;
  if (cells > kMaxStageMicrobatches)
    fail("pipeline schedule: ", stages, " stages x ", microbatches, " micro-batches = ", cells,
         " is more than the limit of ", kMaxStageMicrobatches,
         " (valid: stages x microbatches <= ", kMaxStageMicrobatches, ")");
}

constexpr size_t kKinds = 8;  // ActionKind's values

// The rules of schedule.h's header comment, given the two facts they read
// from the schedule: whether `stage` lists communication, and whether a
// stage lists I (rather than B) for a micro-batch.
template <typename ListsInputGrad>
std::vector<Dependency> dependencies_given(int P, int stage, const Action& action,
                                           bool explicit_form,
                                           const ListsInputGrad& lists_input_grad) {
  const int mb = action.microbatch;
  auto backward_of = [&](int st) {
    return Action{lists_input_grad(st, mb) ? ActionKind::input_grad : ActionKind::backward, mb};
  };
  std::vector<Dependency> deps;
  switch (action.kind) {
    case ActionKind::forward:
      if (stage > 0)
        deps.push_back(explicit_form
                           ? Dependency{stage, {ActionKind::recv_activation, mb}, false}
                           : Dependency{stage - 1, {ActionKind::forward, mb}, true});
      break;
    case ActionKind::backward:
    case ActionKind::input_grad:
      deps.push_back({stage, {ActionKind::forward, mb}, false});
      if (stage < P - 1)
        deps.push_back(explicit_form
                           ? Dependency{stage, {ActionKind::recv_grad, mb}, false}
                           : Dependency{stage + 1, backward_of(stage + 1), true});
      break;
    case ActionKind::weight_grad:
      deps.push_back({stage, {ActionKind::input_grad, mb}, false});
      break;
    // Sends wait only for what they send (they never block on the
    // receiver); receives wait for the matching send one hop away.
    case ActionKind::send_activation:
      deps.push_back({stage, {ActionKind::forward, mb}, false});
      break;
    case ActionKind::recv_activation:
      if (stage > 0) deps.push_back({stage - 1, {ActionKind::send_activation, mb}, true});
      break;
    case ActionKind::send_grad:
      deps.push_back({stage, backward_of(stage), false});
      break;
    case ActionKind::recv_grad:
      if (stage < P - 1) deps.push_back({stage + 1, {ActionKind::send_grad, mb}, true});
      break;
  }
  return deps;
}

Schedule gpipe(int P, int M, ActionKind backward) {
  Schedule s{M, std::vector<std::vector<Action>>(P)};
  for (auto& stage : s.stages) {
    for (int mb = 0; mb < M; ++mb) stage.push_back({ActionKind::forward, mb});
    for (int mb = 0; mb < M; ++mb) stage.push_back({backward, mb});
  }
  return s;
}

Schedule one_f_one_b(int P, int M, ActionKind backward) {
  Schedule s{M, std::vector<std::vector<Action>>(P)};
  for (int st = 0; st < P; ++st) {
    auto& stage = s.stages[st];
    const int warmup = std::min(P - 1 - st, M);
    int next_f = 0, next_b = 0;
    while (next_f < warmup) stage.push_back({ActionKind::forward, next_f++});
    while (next_f < M) {
      stage.push_back({ActionKind::forward, next_f++});
      stage.push_back({backward, next_b++});
    }
    while (next_b < M) stage.push_back({backward, next_b++});
  }
  return s;
}

void append_weight_grads(Schedule& s) {
  for (auto& stage : s.stages)
    for (int mb = 0; mb < s.microbatches; ++mb) stage.push_back({ActionKind::weight_grad, mb});
}

// List scheduling at unit cost and no latency (see make_schedule). Each
// action started at step t ends at t + 1; a decision at t sees only actions
// ended by t, so every stage decides from the same state.
Schedule zero_bubble_h1(int P, int M) {
  Schedule s{M, std::vector<std::vector<Action>>(P)};
  const int never = -1;
  // end step of F(mb) and I(mb) per stage; never until run.
  std::vector<std::vector<int>> f_end(P, std::vector<int>(M, never));
  std::vector<std::vector<int>> i_end(P, std::vector<int>(M, never));
  std::vector<int> next_f(P, 0), next_i(P, 0), next_w(P, 0);
  auto done = [&](int end, int t) { return end != never && end <= t; };
  int finished = 0;
  // Each step at least one stage runs something (shown by the dependency
  // chains), so 3 P M steps bound the loop; the check guards that argument.
  for (int t = 0; finished < P; ++t) {
    SDP_CHECK(t <= 3 * P * M + 3, "zb-h1 list scheduling made no progress at step ", t);
    for (int st = 0; st < P; ++st) {
      if (next_w[st] == M) continue;
      auto& stage = s.stages[st];
      // In flight from F until I: after I only the weight-gradient state
      // is left, which is what lets W wait without raising 1F1B's peak.
      const int in_flight = next_f[st] - next_i[st];
      const int cap = P - st;
      const int i = next_i[st];
      const bool i_ready = i < M && done(f_end[st][i], t) &&
                           (st == P - 1 || done(i_end[st + 1][i], t));
      const int f = next_f[st];
      const bool f_ready = f < M && in_flight < cap && (st == 0 || done(f_end[st - 1][f], t));
      // A stage runs one action at a time: its own earlier I has ended by
      // the time it is free, so every W below next_i is ready.
      if (i_ready) {
        stage.push_back({ActionKind::input_grad, i});
        i_end[st][i] = t + 1;
        ++next_i[st];
      } else if (f_ready) {
        stage.push_back({ActionKind::forward, f});
        f_end[st][f] = t + 1;
        ++next_f[st];
      } else if (next_w[st] < next_i[st]) {
        stage.push_back({ActionKind::weight_grad, next_w[st]++});
        if (next_w[st] == M) ++finished;
      }
    }
  }
  return s;
}

// No pipelining: every stage runs F(mb) and B(mb) (or I(mb)) in turn, so
// the first stage starts a micro-batch only once the previous one's
// backward is back: one micro-batch in the pipeline at a time.
Schedule naive(int P, int M, ActionKind backward) {
  Schedule s{M, std::vector<std::vector<Action>>(P)};
  for (auto& stage : s.stages)
    for (int mb = 0; mb < M; ++mb) {
      stage.push_back({ActionKind::forward, mb});
      stage.push_back({backward, mb});
    }
  return s;
}

// 1F1B's F and I order kept on every stage; in the cool-down (the stage's
// forwards all issued) a stage whose next I has not arrived runs its
// oldest deferred W instead; the Ws left over end the list. List
// scheduling at unit cost (F = I = W), no latency, as zb-h1.
Schedule one_f_one_b_cooldown(int P, int M) {
  const Schedule order = one_f_one_b(P, M, ActionKind::input_grad);
  Schedule s{M, std::vector<std::vector<Action>>(P)};
  const int never = -1;
  std::vector<std::vector<int>> f_end(P, std::vector<int>(M, never));
  std::vector<std::vector<int>> i_end(P, std::vector<int>(M, never));
  std::vector<size_t> next(P, 0);      // next position in order.stages[st]
  std::vector<int> forwards(P, 0), inputs(P, 0), next_w(P, 0);
  auto done = [&](int end, int t) { return end != never && end <= t; };
  int finished = 0;
  for (int t = 0; finished < P; ++t) {
    SDP_CHECK(t <= 4 * P * M + 4, "1f1b-2bp-cooldown list scheduling made no progress at step ",
              t);
    for (int st = 0; st < P; ++st) {
      const std::vector<Action>& list = order.stages[static_cast<size_t>(st)];
      auto& stage = s.stages[static_cast<size_t>(st)];
      if (next[st] == list.size()) continue;
      const Action a = list[next[st]];
      const bool ready = a.kind == ActionKind::forward
                             ? st == 0 || done(f_end[st - 1][a.microbatch], t)
                             : done(f_end[st][a.microbatch], t) &&
                                   (st == P - 1 || done(i_end[st + 1][a.microbatch], t));
      if (ready) {
        stage.push_back(a);
        (a.kind == ActionKind::forward ? f_end : i_end)[st][a.microbatch] = t + 1;
        ++(a.kind == ActionKind::forward ? forwards : inputs)[st];
        if (++next[st] == list.size()) {
          while (next_w[st] < M) stage.push_back({ActionKind::weight_grad, next_w[st]++});
          ++finished;
        }
      } else if (forwards[st] == M && next_w[st] < inputs[st]) {
        // A stage runs one action at a time: its own earlier I has ended.
        stage.push_back({ActionKind::weight_grad, next_w[st]++});
      }
    }
  }
  return s;
}

}  // namespace

std::string to_string(const Action& action) {
  return format(prefix(action.kind), action.microbatch);
}

bool is_communication(ActionKind kind) {
  return kind == ActionKind::send_activation || kind == ActionKind::recv_activation ||
         kind == ActionKind::send_grad || kind == ActionKind::recv_grad;
}

bool lists_communication(const std::vector<Action>& actions) {
  return std::any_of(actions.begin(), actions.end(),
                     [](const Action& a) { return is_communication(a.kind); });
}

bool lists_communication(const Schedule& schedule) {
  return std::any_of(schedule.stages.begin(), schedule.stages.end(),
                     [](const std::vector<Action>& stage) { return lists_communication(stage); });
}

Action parse_action(const std::string& text) {
  auto bad = [&]() -> Action {
    fail("pipeline action \"", text,
         "\": valid forms are F<mb>, B<mb>, I<mb>, W<mb>, SEND_F<mb>, RECV_F<mb>, SEND_B<mb>, "
         "RECV_B<mb> with mb a non-negative integer (e.g. F0, I12, SEND_F3)");
  };
  Action a;
  size_t digits = std::string::npos;  // where the micro-batch starts
  for (ActionKind kind : kAllKinds) {
    const std::string_view p = prefix(kind);
    if (text.compare(0, p.size(), p) == 0) {
      a.kind = kind;
      digits = p.size();
      break;
    }
  }
  // At least one digit, at most 10 (the range check below stops overflow).
  if (digits == std::string::npos || text.size() <= digits || text.size() - digits > 10)
    return bad();
  long long mb = 0;
  for (size_t k = digits; k < text.size(); ++k) {
    if (text[k] < '0' || text[k] > '9') return bad();
    mb = mb * 10 + (text[k] - '0');
  }
  if (mb > 1000000000) return bad();
  a.microbatch = static_cast<int>(mb);
  return a;
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names{"gpipe",     "1f1b",      "gpipe-2bp",
                                              "1f1b-2bp",  "zb-h1",     "1f1b-2bp-cooldown",
                                              "naive",     "naive-2bp"};
  return names;
}

Schedule make_schedule(const std::string& name, int stages, int microbatches) {
  check_counts(stages, microbatches);
  if (name == "gpipe") return gpipe(stages, microbatches, ActionKind::backward);
  if (name == "1f1b") return one_f_one_b(stages, microbatches, ActionKind::backward);
  if (name == "gpipe-2bp") {
    Schedule s = gpipe(stages, microbatches, ActionKind::input_grad);
    append_weight_grads(s);
    return s;
  }
  if (name == "1f1b-2bp") {
    Schedule s = one_f_one_b(stages, microbatches, ActionKind::input_grad);
    append_weight_grads(s);
    return s;
  }
  if (name == "zb-h1") return zero_bubble_h1(stages, microbatches);
  if (name == "1f1b-2bp-cooldown") return one_f_one_b_cooldown(stages, microbatches);
  if (name == "naive") return naive(stages, microbatches, ActionKind::backward);
  if (name == "naive-2bp") {
    Schedule s = naive(stages, microbatches, ActionKind::input_grad);
    append_weight_grads(s);
    return s;
  }
  std::string valid;
  for (const auto& n : schedule_names()) valid += (valid.empty() ? "" : ", ") + n;
  fail("pipeline schedule \"", name, "\" is unknown (valid: ", valid, ")");
}

Schedule with_communication(const Schedule& schedule) {
  if (lists_communication(schedule)) return schedule;
  const int P = schedule.num_stages();
  Schedule explicit_form{schedule.microbatches, std::vector<std::vector<Action>>(P)};
  for (int st = 0; st < P; ++st) {
    auto& out = explicit_form.stages[st];
    for (const Action& a : schedule.stages[st]) {
      const int mb = a.microbatch;
      switch (a.kind) {
        case ActionKind::forward:
          if (st > 0) out.push_back({ActionKind::recv_activation, mb});
          out.push_back(a);
          if (st < P - 1) out.push_back({ActionKind::send_activation, mb});
          break;
        case ActionKind::backward:
        case ActionKind::input_grad:
          if (st < P - 1) out.push_back({ActionKind::recv_grad, mb});
          out.push_back(a);
          if (st > 0) out.push_back({ActionKind::send_grad, mb});
          break;
        default: out.push_back(a); break;  // W; communication was ruled out above
      }
    }
  }
  return explicit_form;
}

std::vector<Dependency> dependencies(const Schedule& schedule, int stage, const Action& action) {
  // The form is the stage's own: validate() refuses a schedule whose stages
  // disagree.
  return dependencies_given(
      schedule.num_stages(), stage, action, lists_communication(schedule.stages[stage]),
      [&](int st, int mb) { return lists(schedule.stages[st], {ActionKind::input_grad, mb}); });
}

ScheduleIndex::ScheduleIndex(const Schedule& schedule) : schedule_(schedule) {
  const int P = schedule.num_stages();
  check_counts(P, schedule.microbatches);
  const size_t M = static_cast<size_t>(schedule.microbatches);
  explicit_.resize(static_cast<size_t>(P));
  positions_.assign(static_cast<size_t>(P) * kKinds * M, kAbsent);
  for (int st = 0; st < P; ++st) {
    const auto& actions = schedule.stages[static_cast<size_t>(st)];
    // More actions than (kind, mb) pairs must repeat one; validate says
    // which. The bound also keeps every position below kAbsent.
    const size_t listed = std::min(actions.size(), kKinds * M + 1);
    explicit_[static_cast<size_t>(st)] = lists_communication(actions);
    for (size_t k = 0; k < listed; ++k) {
      const Action& a = actions[k];
      if (a.microbatch < 0 || static_cast<size_t>(a.microbatch) >= M) continue;
      uint32_t& at = positions_[(static_cast<size_t>(st) * kKinds + static_cast<size_t>(a.kind)) *
                                    M +
                                static_cast<size_t>(a.microbatch)];
      if (at == kAbsent) at = static_cast<uint32_t>(k);
    }
  }
}

uint32_t ScheduleIndex::position(int stage, const Action& action) const {
  const size_t M = static_cast<size_t>(schedule_.microbatches);
  if (action.microbatch < 0 || static_cast<size_t>(action.microbatch) >= M) return kAbsent;
  return positions_[(static_cast<size_t>(stage) * kKinds + static_cast<size_t>(action.kind)) * M +
                    static_cast<size_t>(action.microbatch)];
}

std::vector<Dependency> ScheduleIndex::dependencies(int stage, const Action& action) const {
  return dependencies_given(schedule_.num_stages(), stage, action, explicit_form(stage),
                            [&](int st, int mb) {
                              return position(st, {ActionKind::input_grad, mb}) != kAbsent;
                            });
}

namespace {

// Why a communication action cannot be on stage `st` of P, or "" when it can.
std::string misplaced(ActionKind kind, int st, int P) {
  const bool first = st == 0, last = st == P - 1;
  if (kind == ActionKind::send_activation && last)
    return "the last stage has no next stage to send activations to";
  if (kind == ActionKind::recv_activation && first)
    return "the first stage receives no activations: no stage sends them (a receive without its "
           "send)";
  if (kind == ActionKind::send_grad && first)
    return "the first stage has no previous stage to send an input gradient to";
  if (kind == ActionKind::recv_grad && last)
    return "the last stage receives no gradients: no stage sends them (a receive without its "
           "send)";
  return "";
}

// Why `action` must come after `needed` on one stage (explicit form).
const char* why_after(const Action& action, const Action& needed) {
  switch (action.kind) {
    case ActionKind::forward: return "F computes on the activation RECV_F receives";
    case ActionKind::send_activation: return "it sends the activation F computes";
    case ActionKind::send_grad: return "it sends the input gradient the backward computes";
    case ActionKind::weight_grad: return "W needs the output gradient that I receives";
    default:
      return needed.kind == ActionKind::recv_grad
                 ? "the backward needs the output gradient RECV_B receives"
                 : "a backward needs its forward's activations";
  }
}

// Per stage: each micro-batch's F once, and B once or I and W once each,
// with F before B/I and I before W in the stage's own order. In the
// explicit form also each send and receive the stage's position needs,
// once, after what it sends and before what reads what it receives. The
// index holds each action's first position, so "listed before action k"
// is position < k and a repeat is an action whose first position is not k.
void check_stage(const Schedule& schedule, const ScheduleIndex& index, int st,
                 bool explicit_form) {
  const auto& actions = schedule.stages[st];
  const int M = schedule.microbatches;
  const int P = schedule.num_stages();
  for (size_t k = 0; k < actions.size(); ++k) {
    const Action& a = actions[k];
    if (a.microbatch < 0 || a.microbatch >= M)
      fail("pipeline schedule: ", where(st, k, a), ": micro-batch ", a.microbatch,
           " is out of range (valid: 0 to ", M - 1, ")");
    const uint32_t first = index.position(st, a);
    if (first != k)
      fail("pipeline schedule: ", where(st, k, a), ": repeats action ", first,
           " (each action runs once per stage)");
    if (is_communication(a.kind)) {
      const std::string why = misplaced(a.kind, st, P);
      if (!why.empty()) fail("pipeline schedule: ", where(st, k, a), ": ", why);
      continue;
    }
    auto has = [&](ActionKind kind) { return index.position(st, {kind, a.microbatch}) < k; };
    const bool backward = a.kind == ActionKind::backward || a.kind == ActionKind::input_grad;
    if (backward && !has(ActionKind::forward))
      fail("pipeline schedule: ", where(st, k, a), ": runs before F", a.microbatch,
           " on the same stage (a backward needs its forward's activations)");
    if (a.kind == ActionKind::weight_grad && !has(ActionKind::input_grad))
      fail("pipeline schedule: ", where(st, k, a), ": runs before I", a.microbatch,
           " on the same stage (W needs the output gradient that I receives)");
    if (a.kind == ActionKind::backward &&
        (has(ActionKind::input_grad) || has(ActionKind::weight_grad)))
      fail("pipeline schedule: ", where(st, k, a), ": micro-batch ", a.microbatch,
           " already has I or W on this stage (use B, or I and W, not both)");
    if ((a.kind == ActionKind::input_grad || a.kind == ActionKind::weight_grad) &&
        has(ActionKind::backward))
      fail("pipeline schedule: ", where(st, k, a), ": micro-batch ", a.microbatch,
           " already has B on this stage (use B, or I and W, not both)");
  }
  for (int mb = 0; mb < M; ++mb) {
    auto has = [&](ActionKind kind) { return index.position(st, {kind, mb}) != ScheduleIndex::kAbsent; };
    if (!has(ActionKind::forward))
      fail("pipeline schedule: stage ", st, " has no F", mb, " (every micro-batch runs F once per stage)");
    if (has(ActionKind::input_grad) && !has(ActionKind::weight_grad))
      fail("pipeline schedule: stage ", st, " has I", mb, " but no W", mb,
           " (a split backward needs both)");
    if (!has(ActionKind::backward) && !has(ActionKind::input_grad))
      fail("pipeline schedule: stage ", st, " has no backward for micro-batch ", mb,
           " (valid: B", mb, ", or I", mb, " and W", mb, ")");
  }
  if (!explicit_form) return;
  for (int mb = 0; mb < M; ++mb) {
    auto has = [&](ActionKind kind) { return index.position(st, {kind, mb}) != ScheduleIndex::kAbsent; };
    if (st > 0 && !has(ActionKind::recv_activation))
      fail("pipeline schedule: stage ", st, " has no RECV_F", mb, " (F", mb,
           " needs the activation stage ", st - 1, " sends with SEND_F", mb, ")");
    if (st < P - 1 && !has(ActionKind::send_activation))
      fail("pipeline schedule: stage ", st, " has no SEND_F", mb, " (stage ", st + 1,
           "'s RECV_F", mb, " waits for it)");
    if (st < P - 1 && !has(ActionKind::recv_grad))
      fail("pipeline schedule: stage ", st, " has no RECV_B", mb,
           " (the backward of micro-batch ", mb, " needs the gradient stage ", st + 1,
           " sends with SEND_B", mb, ")");
    if (st > 0 && !has(ActionKind::send_grad))
      fail("pipeline schedule: stage ", st, " has no SEND_B", mb, " (stage ", st - 1,
           "'s RECV_B", mb, " waits for it)");
  }
  // Every action exists now; each must follow what it needs on its stage.
  for (size_t k = 0; k < actions.size(); ++k) {
    const Action& a = actions[k];
    for (const Dependency& d : index.dependencies(st, a)) {
      if (d.stage != st) continue;
      const uint32_t at = index.position(st, d.action);
      if (at == ScheduleIndex::kAbsent || at > k)
        fail("pipeline schedule: ", where(st, k, a), ": runs before ", to_string(d.action),
             " (action ", at, ") on the same stage (", why_after(a, d.action), ")");
    }
  }
}

// Either no stage lists communication (implicit form) or, with more than
// one stage, every stage does (explicit form); a stage of a one-stage
// pipeline has nothing to send, which check_stage says.
void check_form(const Schedule& schedule) {
  if (!lists_communication(schedule) || schedule.num_stages() == 1) return;
  int with = -1, without = -1;
  for (int st = 0; st < schedule.num_stages(); ++st)
    (lists_communication(schedule.stages[st]) ? with : without) = st;
  if (without >= 0)
    fail("pipeline schedule mixes forms: stage ", with, " lists sends and receives, stage ",
         without, " lists none (list every SEND_F, RECV_F, SEND_B and RECV_B, or none and let "
         "with_communication() add them)");
}

// Runs the stages' lists in order, each action waiting for its
// dependencies; refuses when no stage can progress before all are done.
// An action has run when its position is below its stage's next[] (lists
// run in order). Work list: dependencies reach one hop at most, so a
// stage's progress can only unblock its neighbours; each stage is
// revisited only after a neighbour advanced, which keeps the whole pass
// linear in the actions. The stages end where they end whatever the order
// of visits (what can run only grows), so the stuck report is the same.
void check_deadlock(const Schedule& schedule, const ScheduleIndex& index) {
  const int P = schedule.num_stages();
  std::vector<size_t> next(static_cast<size_t>(P), 0);
  auto ran = [&](const Dependency& d) {
    const uint32_t at = index.position(d.stage, d.action);
    return at != ScheduleIndex::kAbsent && at < next[static_cast<size_t>(d.stage)];
  };
  std::vector<int> work;                            // stages to visit
  std::vector<char> queued(static_cast<size_t>(P), 1);
  for (int st = P - 1; st >= 0; --st) work.push_back(st);
  while (!work.empty()) {
    const int st = work.back();
    work.pop_back();
    queued[static_cast<size_t>(st)] = 0;
    const auto& actions = schedule.stages[static_cast<size_t>(st)];
    size_t& n = next[static_cast<size_t>(st)];
    const size_t before = n;
    while (n < actions.size()) {
      bool ready = true;
      for (const auto& d : index.dependencies(st, actions[n])) ready = ready && ran(d);
      if (!ready) break;
      ++n;
    }
    if (n == before) continue;
    for (int neighbour : {st - 1, st + 1})
      if (neighbour >= 0 && neighbour < P && !queued[static_cast<size_t>(neighbour)]) {
        queued[static_cast<size_t>(neighbour)] = 1;
        work.push_back(neighbour);
      }
  }
  std::string stuck;
  for (int st = 0; st < P; ++st) {
    const auto& actions = schedule.stages[static_cast<size_t>(st)];
    const size_t n = next[static_cast<size_t>(st)];
    if (n == actions.size()) continue;
    const Action& a = actions[n];
    std::string waits;
    for (const auto& d : index.dependencies(st, a))
      if (!ran(d))
        waits += format(waits.empty() ? "" : " and ", to_string(d.action), " on stage ", d.stage);
    stuck += format("; ", where(st, n, a), " waits for ", waits);
  }
  if (!stuck.empty()) fail("pipeline schedule deadlocks (no stage can progress)", stuck);
}

// Messages between two neighbours in one direction arrive in the order
// they were sent (the executor's communicators match them so): the
// micro-batches a stage sends across a boundary must be the ones its
// neighbour receives, in the same order. Explicit form: the sends and
// receives as listed.
void check_message_order(const Schedule& schedule) {
  const int P = schedule.num_stages();
  auto sequence = [&](int st, ActionKind kind) {
    std::vector<std::pair<int, size_t>> out;  // (micro-batch, index in the list)
    const auto& actions = schedule.stages[static_cast<size_t>(st)];
    for (size_t k = 0; k < actions.size(); ++k)
      if (actions[k].kind == kind) out.push_back({actions[k].microbatch, k});
    return out;
  };
  auto compare = [&](int from, ActionKind send, int to, ActionKind recv, const char* what) {
    const auto sent = sequence(from, send), received = sequence(to, recv);
    for (size_t n = 0; n < std::min(sent.size(), received.size()); ++n)
      if (sent[n].first != received[n].first)
        fail("pipeline schedule: ", where(to, received[n].second, {recv, received[n].first}),
             " is stage ", to, "'s receive number ", n + 1, " of ", what, " from stage ", from,
             ", which sends micro-batch ", sent[n].first, " as its number ", n + 1, " (",
             to_string({send, sent[n].first}), " at index ", sent[n].second,
             "); messages between neighbours arrive in the order they are sent (valid: both "
             "stages of a boundary in the same micro-batch order)");
  };
  for (int st = 0; st + 1 < P; ++st) {
    compare(st, ActionKind::send_activation, st + 1, ActionKind::recv_activation, "activations");
    compare(st + 1, ActionKind::send_grad, st, ActionKind::recv_grad, "input gradients");
  }
}

// The same rule in the implicit form, where the sends and receives are
// implied (with_communication puts SEND_F after each F and RECV_F before
// it, SEND_B after each B or I and RECV_B before it): a boundary's
// messages follow the order in which the sender runs its Fs (Bs or Is),
// and the receiver takes them in the order it runs its own. Without this
// check a schedule whose neighbours run micro-batches in different orders
// passed here and failed only once lowered (sdp-train lowers it,
// sdp-pipeline simulated it as written).
void check_implicit_message_order(const Schedule& schedule) {
  const int P = schedule.num_stages();
  auto sequence = [&](int st, bool backward) {
    std::vector<std::pair<int, size_t>> out;  // (micro-batch, index in the list)
    const auto& actions = schedule.stages[static_cast<size_t>(st)];
    for (size_t k = 0; k < actions.size(); ++k) {
      const ActionKind kind = actions[k].kind;
      const bool is_backward = kind == ActionKind::backward || kind == ActionKind::input_grad;
      if (backward ? is_backward : kind == ActionKind::forward)
        out.push_back({actions[k].microbatch, k});
    }
    return out;
  };
  auto compare = [&](int from, int to, bool backward) {
    const auto sent = sequence(from, backward), received = sequence(to, backward);
    const char* runs = backward ? "backward" : "forward";
    for (size_t n = 0; n < std::min(sent.size(), received.size()); ++n)
      if (sent[n].first != received[n].first) {
        const Action& reads = schedule.stages[static_cast<size_t>(to)][received[n].second];
        const Action& sends = schedule.stages[static_cast<size_t>(from)][sent[n].second];
        fail("pipeline schedule: ", where(to, received[n].second, reads), " is stage ", to,
             "'s ", runs, " number ", n + 1, ", so it reads ",
             backward ? "input gradient" : "activation", " number ", n + 1, " from stage ", from,
             ", which stage ", from, " sends after its ", runs, " number ", n + 1, ", ",
             to_string(sends), " (action ", sent[n].second, "): micro-batch ", sends.microbatch,
             ", not ", reads.microbatch,
             "; messages between neighbours arrive in the order they are sent (valid: both "
             "stages of a boundary in the same micro-batch order)");
      }
  };
  for (int st = 0; st + 1 < P; ++st) {
    compare(st, st + 1, false);
    compare(st + 1, st, true);
  }
}

}  // namespace

void validate(const Schedule& schedule) {
  check_counts(schedule.num_stages(), schedule.microbatches);
  check_form(schedule);
  const bool explicit_form = lists_communication(schedule);
  const ScheduleIndex index(schedule);
  for (int st = 0; st < schedule.num_stages(); ++st)
    check_stage(schedule, index, st, explicit_form);
  // Explicit: the listed order first, as the sends and receives are the
  // user's own. Implicit: a deadlock first (its report names the waits),
  // then the order the lowering would give the messages.
  if (explicit_form) check_message_order(schedule);
  check_deadlock(schedule, index);
  if (!explicit_form) check_implicit_message_order(schedule);
}

nlohmann::json to_json(const Schedule& schedule) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& stage : schedule.stages) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& a : stage) list.push_back(to_string(a));
    stages.push_back(list);
  }
  return {{"microbatches", schedule.microbatches}, {"stages", stages}};
}

Schedule schedule_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("stages") || !j["stages"].is_array())
    fail("pipeline schedule JSON: expected an object with \"stages\": a list of per-stage lists "
         "of actions, e.g. {\"stages\": [[\"F0\", \"B0\"]]}");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (key != "stages" && key != "microbatches")
      fail("pipeline schedule JSON: unknown key \"", key, "\" (valid: stages, microbatches)");
  }
  Schedule s;
  int largest = -1;
  for (size_t st = 0; st < j["stages"].size(); ++st) {
    const auto& list = j["stages"][st];
    if (!list.is_array())
      fail("pipeline schedule JSON: stage ", st, " is not a list of actions");
    std::vector<Action> actions;
    for (size_t k = 0; k < list.size(); ++k) {
      if (!list[k].is_string())
        fail("pipeline schedule JSON: stage ", st, " action ", k, " is not a string like \"F0\"");
      actions.push_back(parse_action(list[k].get<std::string>()));
      largest = std::max(largest, actions.back().microbatch);
    }
    s.stages.push_back(std::move(actions));
  }
  if (j.contains("microbatches")) {
    s.microbatches = microbatches_from_json(j["microbatches"], "pipeline schedule JSON: microbatches");
  } else {
    s.microbatches = largest + 1;
  }
  return s;
}

void save_schedule(const Schedule& schedule, const std::string& path) {
  std::ofstream out(path);
  if (!out) fail("pipeline schedule: cannot open \"", path, "\" for writing");
  out << to_json(schedule).dump(2) << "\n";
  if (!out) fail("pipeline schedule: writing \"", path, "\" failed");
}

int microbatches_from_json(const nlohmann::json& value, const std::string& what) {
  return json_integer<int>(value, what, 1, kMaxMicrobatches);
}

Schedule load_valid_schedule(const std::string& path) {
  Schedule schedule = load_schedule(path);
  validate(schedule);
  return schedule;
}

Schedule load_schedule(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("pipeline schedule: cannot open \"", path, "\"");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    fail("pipeline schedule: \"", path, "\" is not valid JSON: ", e.what());
  }
  return schedule_from_json(j);
}

}  // namespace sdp::pipeline
