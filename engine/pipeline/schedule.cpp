#include "engine/pipeline/schedule.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <string_view>
#include <utility>

#include "engine/core/error.h"

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

// The backward action (B or I) that stage `stage` lists for `mb`: I when it
// lists I, else B (also when it lists neither; validate refuses that first).
Action backward_of(const Schedule& schedule, int stage, int mb) {
  const Action input_grad{ActionKind::input_grad, mb};
  return lists(schedule.stages[stage], input_grad) ? input_grad : Action{ActionKind::backward, mb};
}

void check_counts(int stages, int microbatches) {
  if (stages < 1) fail("pipeline schedule: stages = ", stages, " (valid: 1 or more)");
  if (microbatches < 1)
    fail("pipeline schedule: microbatches = ", microbatches, " (valid: 1 or more)");
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
  static const std::vector<std::string> names{"gpipe", "1f1b", "gpipe-2bp", "1f1b-2bp", "zb-h1"};
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
  const int P = schedule.num_stages();
  const int mb = action.microbatch;
  // The form is the stage's own: validate() refuses a schedule whose stages
  // disagree, and looking at one stage keeps this cheap for the deadlock check.
  const bool explicit_form = lists_communication(schedule.stages[stage]);
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
                           : Dependency{stage + 1, backward_of(schedule, stage + 1, mb), true});
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
      deps.push_back({stage, backward_of(schedule, stage, mb), false});
      break;
    case ActionKind::recv_grad:
      if (stage < P - 1) deps.push_back({stage + 1, {ActionKind::send_grad, mb}, true});
      break;
  }
  return deps;
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
// once, after what it sends and before what reads what it receives.
void check_stage(const Schedule& schedule, int st, bool explicit_form) {
  const auto& actions = schedule.stages[st];
  const int M = schedule.microbatches;
  const int P = schedule.num_stages();
  // (kind, mb) -> first index
  std::map<std::pair<ActionKind, int>, size_t> seen;
  for (size_t k = 0; k < actions.size(); ++k) {
    const Action& a = actions[k];
    if (a.microbatch < 0 || a.microbatch >= M)
      fail("pipeline schedule: ", where(st, k, a), ": micro-batch ", a.microbatch,
           " is out of range (valid: 0 to ", M - 1, ")");
    const auto key = std::make_pair(a.kind, a.microbatch);
    if (seen.count(key))
      fail("pipeline schedule: ", where(st, k, a), ": repeats action ", seen[key],
           " (each action runs once per stage)");
    seen[key] = k;
    if (is_communication(a.kind)) {
      const std::string why = misplaced(a.kind, st, P);
      if (!why.empty()) fail("pipeline schedule: ", where(st, k, a), ": ", why);
      continue;
    }
    auto has = [&](ActionKind kind) { return seen.count({kind, a.microbatch}) > 0; };
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
    auto has = [&](ActionKind kind) { return seen.count({kind, mb}) > 0; };
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
    auto has = [&](ActionKind kind) { return seen.count({kind, mb}) > 0; };
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
    for (const Dependency& d : dependencies(schedule, st, a)) {
      if (d.stage != st) continue;
      const size_t at = seen.at({d.action.kind, d.action.microbatch});
      if (at > k)
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
void check_deadlock(const Schedule& schedule) {
  const int P = schedule.num_stages();
  std::vector<size_t> next(P, 0);
  std::map<std::pair<int, std::pair<ActionKind, int>>, bool> done;  // (stage, action) -> ran
  auto ran = [&](int st, const Action& a) {
    return done.count({st, {a.kind, a.microbatch}}) > 0;
  };
  for (;;) {
    bool progressed = false, all_done = true;
    for (int st = 0; st < P; ++st) {
      const auto& actions = schedule.stages[st];
      while (next[st] < actions.size()) {
        const Action& a = actions[next[st]];
        bool ready = true;
        for (const auto& d : dependencies(schedule, st, a)) ready = ready && ran(d.stage, d.action);
        if (!ready) break;
        done[{st, {a.kind, a.microbatch}}] = true;
        ++next[st];
        progressed = true;
      }
      all_done = all_done && next[st] == actions.size();
    }
    if (all_done) return;
    if (progressed) continue;
    std::string stuck;
    for (int st = 0; st < P; ++st) {
      const auto& actions = schedule.stages[st];
      if (next[st] == actions.size()) continue;
      const Action& a = actions[next[st]];
      std::string waits;
      for (const auto& d : dependencies(schedule, st, a))
        if (!ran(d.stage, d.action))
          waits += format(waits.empty() ? "" : " and ", to_string(d.action), " on stage ", d.stage);
      stuck += format("; ", where(st, next[st], a), " waits for ", waits);
    }
    fail("pipeline schedule deadlocks (no stage can progress)", stuck);
  }
}

// Messages between two neighbours in one direction arrive in the order
// they were sent (the executor's communicators match them so): the
// micro-batches a stage sends across a boundary must be the ones its
// neighbour receives, in the same order.
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

}  // namespace

void validate(const Schedule& schedule) {
  check_counts(schedule.num_stages(), schedule.microbatches);
  check_form(schedule);
  const bool explicit_form = lists_communication(schedule);
  for (int st = 0; st < schedule.num_stages(); ++st) check_stage(schedule, st, explicit_form);
  if (explicit_form) check_message_order(schedule);
  check_deadlock(schedule);
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
    if (!j["microbatches"].is_number_integer())
      fail("pipeline schedule JSON: \"microbatches\" must be an integer");
    s.microbatches = j["microbatches"].get<int>();
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
