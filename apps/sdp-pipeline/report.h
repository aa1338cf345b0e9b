#pragma once
// The simulated figures of each schedule sdp-pipeline compares, as a text
// table (one summary row per schedule, then one row per stage) or as JSON.
// Column meanings: apps/sdp-pipeline/README.md.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/pipeline/schedule.h"
#include "engine/pipeline/schedule_simulator.h"

namespace sdp::pipeline_tool {

struct SimulatedSchedule {
  std::string name;  // as given: a generator name or file:PATH
  pipeline::Schedule schedule;
  pipeline::SimulationResult result;
};

struct PipelineReport {
  std::string costs_source;  // "uniform defaults" or the costs file's path
  std::vector<SimulatedSchedule> schedules;  // the first is the reference of "vs first"
};

std::string render_text(const PipelineReport& report);
nlohmann::json render_json(const PipelineReport& report);

}  // namespace sdp::pipeline_tool
