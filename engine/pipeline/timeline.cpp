#include "engine/pipeline/timeline.h"

#include <algorithm>
#include <cmath>

#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"

namespace sdp::pipeline {

bool runs_compute(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward:
    case ActionKind::backward:
    case ActionKind::input_grad:
    case ActionKind::weight_grad: return true;
    case ActionKind::send_activation:
    case ActionKind::recv_activation:
    case ActionKind::send_grad:
    case ActionKind::recv_grad: return false;
  }
  return false;
}

double TimelineStats::mean_bubble() const {
  if (bubble_fraction.empty()) return 0.0;
  double sum = 0.0;
  for (double b : bubble_fraction) sum += b;
  return sum / static_cast<double>(bubble_fraction.size());
}

void check_timeline(const Schedule& schedule, const Timeline& timeline) {
  const int P = schedule.num_stages();
  if (static_cast<int>(timeline.timings.size()) != P)
    fail("pipeline timeline: ", timeline.timings.size(), " stages of timings for a schedule of ", P,
         " stages (valid: one list per stage)");
  for (int st = 0; st < P; ++st) {
    const auto& actions = schedule.stages[st];
    const auto& timings = timeline.timings[st];
    if (timings.size() != actions.size())
      fail("pipeline timeline: stage ", st, " has ", timings.size(), " timings for ", actions.size(),
           " actions (valid: one timing per action)");
    for (size_t k = 0; k < actions.size(); ++k) {
      const ActionTiming& t = timings[k];
      if (!std::isfinite(t.start) || !std::isfinite(t.end) || t.start < 0 || t.end < t.start)
        fail("pipeline timeline: stage ", st, " action ", k, " (", to_string(actions[k]),
             ") runs from ", t.start, " to ", t.end,
             " (valid: finite, 0 <= start <= end, seconds from the step's start)");
    }
  }
}

TimelineStats timeline_stats(const Schedule& schedule, const Timeline& timeline) {
  check_timeline(schedule, timeline);
  const int P = schedule.num_stages();
  TimelineStats s;
  s.busy.assign(P, 0.0);
  for (int st = 0; st < P; ++st)
    for (size_t k = 0; k < schedule.stages[st].size(); ++k) {
      const ActionTiming& t = timeline.timings[st][k];
      s.makespan = std::max(s.makespan, t.end);
      if (runs_compute(schedule.stages[st][k].kind)) s.busy[st] += t.end - t.start;
    }
  s.bubble_fraction.assign(P, 0.0);
  if (s.makespan > 0)
    for (int st = 0; st < P; ++st) s.bubble_fraction[st] = (s.makespan - s.busy[st]) / s.makespan;
  return s;
}

nlohmann::json timeline_to_json(const Schedule& schedule, const Timeline& timeline) {
  check_timeline(schedule, timeline);
  nlohmann::json stages = nlohmann::json::array();
  for (int st = 0; st < schedule.num_stages(); ++st) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t k = 0; k < schedule.stages[st].size(); ++k) {
      const ActionTiming& t = timeline.timings[st][k];
      list.push_back({{"action", to_string(schedule.stages[st][k])}, {"start", t.start}, {"end", t.end}});
    }
    stages.push_back(std::move(list));
  }
  return {{"microbatches", schedule.microbatches}, {"stages", std::move(stages)}};
}

namespace {

const char* const kForm =
    "{\"microbatches\": M, \"stages\": [[{\"action\": \"F0\", \"start\": 0.0, \"end\": 1.0}, ...], ...]}";

double number_field(const nlohmann::json& entry, const char* key, size_t st, size_t k) {
  if (!entry.contains(key) || !entry[key].is_number())
    fail("pipeline timeline JSON: stage ", st, " entry ", k, " needs a number \"", key,
         "\" (expected ", kForm, ")");
  return entry[key].get<double>();
}

}  // namespace

TimedSchedule timed_schedule_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("stages") || !j["stages"].is_array())
    fail("pipeline timeline JSON: expected ", kForm);
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (key != "stages" && key != "microbatches")
      fail("pipeline timeline JSON: unknown key \"", key, "\" (valid: stages, microbatches)");
  }
  TimedSchedule out;
  int largest = -1;
  for (size_t st = 0; st < j["stages"].size(); ++st) {
    const auto& list = j["stages"][st];
    if (!list.is_array()) fail("pipeline timeline JSON: stage ", st, " is not a list (expected ", kForm, ")");
    std::vector<Action> actions;
    std::vector<ActionTiming> timings;
    for (size_t k = 0; k < list.size(); ++k) {
      const auto& entry = list[k];
      if (!entry.is_object() || !entry.contains("action") || !entry["action"].is_string())
        fail("pipeline timeline JSON: stage ", st, " entry ", k,
             " is not an object with a string \"action\" (expected ", kForm, ")");
      for (const auto& [key, value] : entry.items()) {
        (void)value;
        if (key != "action" && key != "start" && key != "end")
          fail("pipeline timeline JSON: stage ", st, " entry ", k, ": unknown key \"", key,
               "\" (valid: action, start, end)");
      }
      actions.push_back(parse_action(entry["action"].get<std::string>()));
      largest = std::max(largest, actions.back().microbatch);
      timings.push_back({number_field(entry, "start", st, k), number_field(entry, "end", st, k)});
    }
    out.schedule.stages.push_back(std::move(actions));
    out.timeline.timings.push_back(std::move(timings));
  }
  if (j.contains("microbatches")) {
    out.schedule.microbatches =
        microbatches_from_json(j["microbatches"], "pipeline timeline JSON: \"microbatches\"");
  } else {
    // Bounded like a written count before anything is sized by it.
    if (largest + 1 > kMaxMicrobatches)
      fail("pipeline timeline JSON: an action names micro-batch ", largest, " (valid: at most ",
           kMaxMicrobatches - 1, ", micro-batches 0 to M - 1 with M <= ", kMaxMicrobatches, ")");
    out.schedule.microbatches = largest + 1;
  }
  check_timeline(out.schedule, out.timeline);
  return out;
}

void save_timeline(const std::string& path, const Schedule& schedule, const Timeline& timeline) {
  checkpoint::write_json_atomically(path, timeline_to_json(schedule, timeline));
}

TimedSchedule load_timeline(const std::string& path) {
  const nlohmann::json j = checkpoint::read_json_file(path);
  try {
    return timed_schedule_from_json(j);
  } catch (const Error& e) {
    fail("\"", path, "\": ", e.what());
  }
}

}  // namespace sdp::pipeline
