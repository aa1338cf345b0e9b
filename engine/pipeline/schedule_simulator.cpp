#include "engine/pipeline/schedule_simulator.h"

#include <algorithm>
#include <map>
#include <utility>

#include "engine/core/error.h"

namespace sdp::pipeline {

namespace {

double cost_of(const StageCosts& c, ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return c.forward;
    case ActionKind::backward: return c.backward;
    case ActionKind::input_grad: return c.input_grad;
    case ActionKind::weight_grad: return c.weight_grad;
  }
  return 0.0;
}

void check_costs(const SimulationCosts& costs, int P) {
  if (!costs.stages.empty() && static_cast<int>(costs.stages.size()) != P)
    fail("pipeline simulation: ", costs.stages.size(), " stage cost entries for ", P,
         " stages (valid: ", P, ", or none for the uniform defaults)");
  for (size_t st = 0; st < costs.stages.size(); ++st) {
    const StageCosts& c = costs.stages[st];
    if (c.forward < 0 || c.backward < 0 || c.input_grad < 0 || c.weight_grad < 0)
      fail("pipeline simulation: stage ", st, " has a negative cost (valid: 0 or more)");
  }
  if (costs.hop_latency < 0)
    fail("pipeline simulation: hop_latency = ", costs.hop_latency, " (valid: 0 or more)");
}

}  // namespace

SimulationResult simulate(const Schedule& schedule, const SimulationCosts& costs) {
  validate(schedule);
  const int P = schedule.num_stages();
  check_costs(costs, P);
  const std::vector<StageCosts> stage_costs =
      costs.stages.empty() ? std::vector<StageCosts>(P) : costs.stages;

  SimulationResult r;
  r.timings.resize(P);
  r.busy.assign(P, 0.0);
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0.0);
  std::map<std::pair<int, std::pair<ActionKind, int>>, double> end_of;  // (stage, action) -> end
  // The validator has shown the blocking execution finishes, so each sweep
  // runs at least one action until every stage is done.
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int st = 0; st < P; ++st) {
      const auto& actions = schedule.stages[st];
      while (next[st] < actions.size()) {
        const Action& a = actions[next[st]];
        double start = free_at[st];
        bool ready = true;
        for (const auto& d : dependencies(schedule, st, a)) {
          auto it = end_of.find({d.stage, {d.action.kind, d.action.microbatch}});
          if (it == end_of.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second + (d.cross_stage ? costs.hop_latency : 0.0));
        }
        if (!ready) break;
        const double duration = cost_of(stage_costs[st], a.kind);
        const double end = start + duration;
        r.timings[st].push_back({start, end});
        end_of[{st, {a.kind, a.microbatch}}] = end;
        free_at[st] = end;
        r.busy[st] += duration;
        r.makespan = std::max(r.makespan, end);
        ++next[st];
        progressed = true;
      }
    }
  }
  for (int st = 0; st < P; ++st)
    SDP_CHECK(next[st] == schedule.stages[st].size(), "simulation stopped early on stage ", st);

  r.bubble_fraction.assign(P, 0.0);
  r.peak_live_activations.assign(P, 0);
  for (int st = 0; st < P; ++st) {
    if (r.makespan > 0) r.bubble_fraction[st] = (r.makespan - r.busy[st]) / r.makespan;
    // A stage runs its actions one after another, so list order is time order.
    int live = 0;
    for (const Action& a : schedule.stages[st]) {
      if (a.kind == ActionKind::forward) ++live;
      if (a.kind == ActionKind::backward || a.kind == ActionKind::weight_grad) --live;
      r.peak_live_activations[st] = std::max(r.peak_live_activations[st], live);
    }
  }
  return r;
}

}  // namespace sdp::pipeline
