#include "apps/sdp-pipeline/report.h"

#include <algorithm>
#include <cstdio>

#include "engine/core/error.h"
#include "engine/pipeline/timeline.h"

namespace sdp::pipeline_tool {

namespace {

std::string general(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

double relative(const PipelineReport& r, const SimulatedSchedule& s) {
  const double first = r.schedules.front().result.makespan;
  return first > 0 ? s.result.makespan / first : 1.0;
}

}  // namespace

std::string render_text(const PipelineReport& report) {
  size_t name_width = 10;
  for (const auto& s : report.schedules) name_width = std::max(name_width, s.name.size() + 2);
  std::string out;
  const auto& first = report.schedules.front();
  out += "stages: " + std::to_string(first.schedule.num_stages()) + ", costs: " + report.costs_source + "\n\n";
  out += pad("schedule", name_width) + pad("M", 6) + pad("step", 12) + pad("vs first", 10) + "mean bubble\n";
  for (const auto& s : report.schedules)
    out += pad(s.name, name_width) + pad(std::to_string(s.schedule.microbatches), 6) +
           pad(general(s.result.makespan), 12) + pad(format_fixed(relative(report, s), 3), 10) +
           format_fixed(100 * mean(s.result.bubble_fraction), 2) + "%\n";
  out += "\n";
  out += pad("schedule", name_width) + pad("stage", 7) + pad("bubble", 10) + pad("busy", 12) +
         pad("peak bytes", 16) + "peak in flight\n";
  for (const auto& s : report.schedules)
    for (int st = 0; st < s.schedule.num_stages(); ++st)
      out += pad(s.name, name_width) + pad(std::to_string(st), 7) +
             pad(format_fixed(100 * s.result.bubble_fraction[st], 2) + "%", 10) + pad(general(s.result.busy[st]), 12) +
             pad(std::to_string(s.result.peak_memory_bytes[st]), 16) +
             std::to_string(s.result.peak_live_activations[st]) + "\n";
  return out;
}

nlohmann::json render_json(const PipelineReport& report) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : report.schedules)
    list.push_back({{"name", s.name},
                    {"stages", s.schedule.num_stages()},
                    {"microbatches", s.schedule.microbatches},
                    {"makespan", s.result.makespan},
                    {"relative_step", relative(report, s)},
                    {"mean_bubble", mean(s.result.bubble_fraction)},
                    {"bubble_fraction", s.result.bubble_fraction},
                    {"busy", s.result.busy},
                    {"peak_memory_bytes", s.result.peak_memory_bytes},
                    {"peak_in_flight", s.result.peak_live_activations},
                    {"timeline", pipeline::timeline_to_json(s.schedule, s.result)}});
  return {{"costs", report.costs_source}, {"schedules", std::move(list)}};
}

}  // namespace sdp::pipeline_tool
