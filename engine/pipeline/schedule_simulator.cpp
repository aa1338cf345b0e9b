#include "engine/pipeline/schedule_simulator.h"

#include <algorithm>
#include <cmath>
#include <tuple>
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
    // Communication takes no stage time here; the link model prices the
    // cross-stage dependency of the receive instead.
    case ActionKind::send_activation:
    case ActionKind::recv_activation:
    case ActionKind::send_grad:
    case ActionKind::recv_grad: return 0.0;
  }
  return 0.0;
}

bool valid_amount(double v) { return std::isfinite(v) && v >= 0; }

void check_costs(const SimulationCosts& costs, int P) {
  if (!costs.stages.empty() && static_cast<int>(costs.stages.size()) != P)
    fail("pipeline simulation: ", costs.stages.size(), " stage cost entries for ", P,
         " stages (valid: ", P, ", or none for the uniform defaults)");
  for (size_t st = 0; st < costs.stages.size(); ++st) {
    const StageCosts& c = costs.stages[st];
    if (!valid_amount(c.forward) || !valid_amount(c.backward) || !valid_amount(c.input_grad) ||
        !valid_amount(c.weight_grad))
      fail("pipeline simulation: stage ", st, " has a negative or non-finite cost (valid: 0 or more)");
    if (c.activation_bytes < 0 || c.weight_grad_bytes < 0)
      fail("pipeline simulation: stage ", st, " has negative activation_bytes or weight_grad_bytes",
           " (valid: 0 or more)");
  }
  if (!costs.boundary_bytes.empty() && static_cast<int>(costs.boundary_bytes.size()) != P - 1)
    fail("pipeline simulation: ", costs.boundary_bytes.size(), " boundary_bytes entries for ", P,
         " stages (valid: ", P - 1, ", one per boundary, or none for 0 bytes)");
  for (size_t b = 0; b < costs.boundary_bytes.size(); ++b)
    if (costs.boundary_bytes[b] < 0)
      fail("pipeline simulation: boundary_bytes[", b, "] = ", costs.boundary_bytes[b],
           " (valid: 0 or more)");
  if (!valid_amount(costs.hop_latency))
    fail("pipeline simulation: hop_latency = ", costs.hop_latency, " (valid: 0 or more)");
  if (!valid_amount(costs.link_bandwidth))
    fail("pipeline simulation: link_bandwidth = ", costs.link_bandwidth,
         " (valid: 0 for an infinite link, or bytes per second > 0)");
}

}  // namespace

double hop_time(const SimulationCosts& costs, int boundary) {
  const double bytes = costs.boundary_bytes.empty()
                           ? 0.0
                           : static_cast<double>(costs.boundary_bytes.at(static_cast<size_t>(boundary)));
  const double transfer = costs.link_bandwidth > 0 ? bytes / costs.link_bandwidth : 0.0;
  return costs.hop_latency + transfer;
}

MemoryPeaks memory_peaks(const Schedule& schedule, const Timeline& timeline, const SimulationCosts& costs) {
  check_timeline(schedule, timeline);
  const int P = schedule.num_stages();
  check_costs(costs, P);
  MemoryPeaks peaks;
  peaks.bytes.assign(P, 0);
  peaks.in_flight.assign(P, 0);
  for (int st = 0; st < P; ++st) {
    const StageCosts c = costs.stages.empty() ? StageCosts{} : costs.stages[st];
    struct Event {
      double time;
      size_t order;  // 2k at action k's start, 2k + 1 at its end: list order breaks ties
      int64_t bytes;
      int in_flight;
    };
    std::vector<Event> events;
    const auto& actions = schedule.stages[st];
    for (size_t k = 0; k < actions.size(); ++k) {
      const ActionTiming& t = timeline.timings[st][k];
      switch (actions[k].kind) {
        case ActionKind::forward: events.push_back({t.start, 2 * k, c.activation_bytes, +1}); break;
        case ActionKind::backward: events.push_back({t.end, 2 * k + 1, -c.activation_bytes, -1}); break;
        case ActionKind::input_grad:
          events.push_back({t.end, 2 * k + 1, c.weight_grad_bytes - c.activation_bytes, 0});
          break;
        case ActionKind::weight_grad: events.push_back({t.end, 2 * k + 1, -c.weight_grad_bytes, -1}); break;
        default: break;  // communication holds nothing in this model
      }
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return std::tie(a.time, a.order) < std::tie(b.time, b.order);
    });
    int64_t bytes = 0;
    int in_flight = 0;
    for (const Event& e : events) {
      bytes += e.bytes;
      in_flight += e.in_flight;
      peaks.bytes[st] = std::max(peaks.bytes[st], bytes);
      peaks.in_flight[st] = std::max(peaks.in_flight[st], in_flight);
    }
  }
  return peaks;
}

SimulationResult simulate(const Schedule& schedule, const SimulationCosts& costs) {
  validate(schedule);
  const int P = schedule.num_stages();
  check_costs(costs, P);
  const std::vector<StageCosts> stage_costs =
      costs.stages.empty() ? std::vector<StageCosts>(P) : costs.stages;

  SimulationResult r;
  r.timings.resize(P);
  // Each stage runs its list in order: an action has ended when its
  // position is below what the stage has run (r.timings[st].size()), and
  // its end is r.timings[st][position].end. Stages are visited from a work
  // list, a stage again only after a neighbour advanced (dependencies reach
  // one hop at most), so the pass is linear in the actions; every action's
  // start is fixed by its stage's previous action and its dependencies, so
  // the order of visits does not change the times. The validator has shown
  // that the blocking execution finishes.
  const ScheduleIndex index(schedule);
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0.0);
  std::vector<int> work;
  std::vector<char> queued(static_cast<size_t>(P), 1);
  for (int st = P - 1; st >= 0; --st) work.push_back(st);
  while (!work.empty()) {
    const int st = work.back();
    work.pop_back();
    queued[static_cast<size_t>(st)] = 0;
    const auto& actions = schedule.stages[st];
    const size_t before = next[st];
    while (next[st] < actions.size()) {
      const Action& a = actions[next[st]];
      double start = free_at[st];
      bool ready = true;
      for (const auto& d : index.dependencies(st, a)) {
        const uint32_t at = index.position(d.stage, d.action);
        if (at == ScheduleIndex::kAbsent || at >= next[d.stage]) {
          ready = false;
          break;
        }
        const double arrives = r.timings[d.stage][at].end +
                               (d.cross_stage ? hop_time(costs, std::min(st, d.stage)) : 0.0);
        start = std::max(start, arrives);
      }
      if (!ready) break;
      const double end = start + cost_of(stage_costs[st], a.kind);
      r.timings[st].push_back({start, end});
      free_at[st] = end;
      ++next[st];
    }
    if (next[st] == before) continue;
    for (int neighbour : {st - 1, st + 1})
      if (neighbour >= 0 && neighbour < P && !queued[static_cast<size_t>(neighbour)]) {
        queued[static_cast<size_t>(neighbour)] = 1;
        work.push_back(neighbour);
      }
  }
  for (int st = 0; st < P; ++st)
    SDP_CHECK(next[st] == schedule.stages[st].size(), "simulation stopped early on stage ", st);

  // The same read-out as a measured timeline gets.
  const TimelineStats stats = timeline_stats(schedule, r);
  r.makespan = stats.makespan;
  r.busy = stats.busy;
  r.bubble_fraction = stats.bubble_fraction;
  const MemoryPeaks peaks = memory_peaks(schedule, r, costs);
  r.peak_live_activations = peaks.in_flight;
  r.peak_memory_bytes = peaks.bytes;
  return r;
}

}  // namespace sdp::pipeline
