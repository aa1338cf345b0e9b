// sdp-pipeline: simulates pipeline schedules for P stages and M micro-batches
// under per-stage costs and a link model (engine/pipeline/schedule_simulator.h),
// prints step time, bubbles and peak memory per schedule, and draws their
// timelines into one SVG (engine/pipeline/timeline_svg.h). No GPU, no MPI.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/integer_option.h"
#include "engine/pipeline/costs_json.h"
#include "apps/sdp-pipeline/report.h"
#include "engine/core/error.h"
#include "engine/pipeline/timeline_svg.h"

namespace {

using namespace sdp;
using namespace sdp::pipeline;
using namespace sdp::pipeline_tool;

constexpr int kMaxStages = 4096;
constexpr int kMaxMicrobatches = 1 << 20;

struct Options {
  std::string schedule = "1f1b";
  std::string compare;
  int stages = 0;        // 0: not given
  int microbatches = 0;  // 0: not given
  std::string costs;
  std::string svg;
  bool json = false;
};

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) fail("--compare '", list, "' has an empty item (expected a comma list, e.g. 1f1b,zb-h1)");
    out.push_back(item);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string valid_names() {
  std::string list;
  for (const auto& n : schedule_names()) list += n + ", ";
  return list + "or file:PATH of a schedule JSON";
}

// A generator name (needs --stages and --micro-batches) or file:PATH (its
// counts are the file's; given flags must agree).
Schedule resolve(const std::string& flag, const std::string& spec, const Options& o) {
  const std::string prefix = "file:";
  if (spec.rfind(prefix, 0) == 0) {
    const Schedule s = load_schedule(spec.substr(prefix.size()));
    validate(s);
    if (o.stages && s.num_stages() != o.stages)
      fail(flag, " '", spec, "' has ", s.num_stages(), " stages but --stages is ", o.stages);
    if (o.microbatches && s.microbatches != o.microbatches)
      fail(flag, " '", spec, "' has ", s.microbatches, " micro-batches but --micro-batches is ", o.microbatches);
    return s;
  }
  bool known = false;
  for (const auto& n : schedule_names()) known = known || n == spec;
  if (!known) fail(flag, " '", spec, "' is unknown (valid: ", valid_names(), ")");
  if (!o.stages) fail(flag, " '", spec, "': --stages is required for a generated schedule");
  if (!o.microbatches) fail(flag, " '", spec, "': --micro-batches is required for a generated schedule");
  return make_schedule(spec, o.stages, o.microbatches);
}

int run(const Options& o) {
  std::vector<std::string> names{o.schedule};
  if (!o.compare.empty())
    for (const auto& n : split_list(o.compare)) names.push_back(n);
  PipelineReport report;
  for (size_t i = 0; i < names.size(); ++i) {
    const Schedule s = resolve(i == 0 ? "--schedule" : "--compare item", names[i], o);
    if (i > 0 && s.num_stages() != report.schedules.front().schedule.num_stages())
      fail("--compare item '", names[i], "' has ", s.num_stages(), " stages, '", names[0], "' has ",
           report.schedules.front().schedule.num_stages(), " (compared schedules share one pipeline)");
    report.schedules.push_back({names[i], s, {}});
  }
  const int P = report.schedules.front().schedule.num_stages();
  SimulationCosts costs;
  report.costs_source = "uniform defaults (F = I = W = 1, B = 2; 1 byte per activation set, no W state, free links)";
  if (!o.costs.empty()) {
    costs = pipeline::load_costs(o.costs, P);
    report.costs_source = o.costs;
  }
  for (auto& s : report.schedules) s.result = simulate(s.schedule, costs);

  if (o.json) {
    std::fputs((render_json(report).dump(2) + "\n").c_str(), stdout);
  } else {
    std::fputs(render_text(report).c_str(), stdout);
  }
  if (!o.svg.empty()) {
    std::vector<TimelinePanel> panels;
    for (const auto& s : report.schedules) panels.push_back({s.name, s.schedule, s.result});
    SvgOptions svg;
    // The default costs are in no particular unit; a costs file's are seconds.
    svg.time_unit = o.costs.empty() ? "units" : "s";
    write_timeline_svg(o.svg, panels, svg);
    if (!o.json) std::printf("\ntimeline: %s\n", o.svg.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "sdp-pipeline: simulated step time, bubble and peak memory of pipeline schedules for P "
      "stages and M micro-batches, and their timelines as SVG (no GPU, no MPI).\n"
      "Example: sdp-pipeline --schedule 1f1b --stages 4 --micro-batches 8 --compare 1f1b-2bp,zb-h1 "
      "--svg pipeline.svg"};
  app.get_formatter()->column_width(30);
  Options o;
  app.add_option("--schedule", o.schedule,
                 "The reference schedule: " + valid_names())
      ->capture_default_str();
  app.add_option("--stages", o.stages, "P, pipeline stages (required for a generated schedule)")
      ->check(app::integer_in(1, kMaxStages));
  app.add_option("--micro-batches", o.microbatches, "M, micro-batches per step (required for a generated schedule)")
      ->check(app::integer_in(1, kMaxMicrobatches));
  app.add_option("--compare", o.compare,
                 "Comma list of more schedules (names or file:PATH), simulated after --schedule "
                 "and reported relative to it");
  app.add_option("--costs", o.costs,
                 std::string("JSON costs file; every key optional (defaults F = I = W = 1, B = 2, "
                             "activation_bytes 1, weight_grad_bytes 0, no link cost; bandwidth 0 = "
                             "infinite): ") +
                     pipeline::kCostsForm);
  app.add_option("--svg", o.svg, "Write the timelines there, one panel per schedule (atomically)");
  app.add_flag("--json", o.json, "Print the figures and timelines as JSON instead of the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every other parse error is bad input, like the rest.
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sdp-pipeline: error: %s\n", e.what());
    return 2;
  }
}
