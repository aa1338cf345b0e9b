#pragma once
// A timeline: when each action of a schedule ran, per stage and in the
// schedule's own indexing (timings[s][k] is stages[s][k]). The simulator
// (schedule_simulator.h) produces one from costs; the pipeline executor
// records one with steady_clock seconds from the step's start. Busy time and
// bubbles are computed here from any timeline, so a measured bubble and a
// simulated one come from the same code.
//
// File form of a (schedule, timeline) pair:
//   {"microbatches": M,
//    "stages": [[{"action": "F0", "start": 0.0, "end": 1.0}, ...], ...]}
// with start and end in seconds (or the unit of the costs that produced it)
// from the step's start.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/pipeline/schedule.h"

namespace sdp::pipeline {

struct ActionTiming {
  double start = 0.0;
  double end = 0.0;
};

struct Timeline {
  std::vector<std::vector<ActionTiming>> timings;  // [P][actions], as the schedule lists them
};

// F, B, I and W compute; the send and receive kinds only move data. A
// stage's busy time counts compute alone: a blocking receive's duration is
// time spent waiting, which is bubble.
bool runs_compute(ActionKind kind);

struct TimelineStats {
  double makespan = 0.0;                // the last end over all stages; the step starts at 0
  std::vector<double> busy;             // [P] summed durations of compute actions
  std::vector<double> bubble_fraction;  // [P] (makespan - busy) / makespan; 0 when makespan is 0
  double mean_bubble() const;           // over stages
};

// Refuses (sdp::Error naming the stage and action) a timeline whose shape is
// not the schedule's, or a timing that is not finite, starts before 0 or
// ends before it starts.
void check_timeline(const Schedule& schedule, const Timeline& timeline);

// Checks the timeline (check_timeline), then sums.
TimelineStats timeline_stats(const Schedule& schedule, const Timeline& timeline);

struct TimedSchedule {
  Schedule schedule;
  Timeline timeline;
};

// The file form above. Reading checks the timings (check_timeline) but, like
// schedule_from_json, does not validate the schedule; "microbatches" may be
// left out (one more than the largest micro-batch named).
nlohmann::json timeline_to_json(const Schedule& schedule, const Timeline& timeline);
TimedSchedule timed_schedule_from_json(const nlohmann::json& j);
// Written atomically (engine/checkpoint/atomic_file.h).
void save_timeline(const std::string& path, const Schedule& schedule, const Timeline& timeline);
TimedSchedule load_timeline(const std::string& path);

}  // namespace sdp::pipeline
