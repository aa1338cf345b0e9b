#include "apps/sdp-train/pipeline_report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"
#include "engine/pipeline/costs_json.h"
#include "engine/pipeline/measured_costs.h"
#include "engine/pipeline/schedule_simulator.h"
#include "engine/pipeline/timeline_svg.h"

namespace sdp::app {

namespace {

// The schedule's name in titles: a pipeline's, or what one stage runs.
std::string schedule_name(const Trainer& trainer) {
  return trainer.layout().pipelined() ? trainer.config().parallel.schedule
                                      : std::string("one stage (micro-batches in turn)");
}

std::string stage_table(const pipeline::Schedule& s, const std::vector<double>& bubble,
                        const std::vector<int>* in_flight, const std::vector<double>* measured) {
  std::string out = format("  ", "stage", "  simulated bubble");
  if (measured) out += "  measured bubble";
  if (in_flight) out += "  peak in flight";
  out += "\n";
  for (int st = 0; st < s.num_stages(); ++st) {
    out += format("  ", st, "      ", format_fixed(100.0 * bubble[static_cast<size_t>(st)], 1), "%");
    if (measured)
      out += format("            ", format_fixed(100.0 * (*measured)[static_cast<size_t>(st)], 1), "%");
    if (in_flight) out += format("            ", (*in_flight)[static_cast<size_t>(st)]);
    out += "\n";
  }
  return out;
}

// An emulated rank: the other stages did not run, so there is no timeline
// of the pipeline, but this stage's own actions ran (their receives counted,
// not waited for): DIR/stage<k>_actions.json lists each with its measured
// start and end in the last step, the per-action costs of this stage alone.
std::string write_stage_actions(const Trainer& trainer, const std::string& dir) {
  const pipeline::StageExecutor& executor = *trainer.pipeline_executor();
  const pipeline::Schedule& s = executor.schedule();
  const int stage = executor.stage();
  const auto& list = s.stages[static_cast<size_t>(stage)];
  const auto& timings = trainer.last_stage_timings();
  SDP_CHECK(timings.size() == list.size(), "write_stage_actions: ", timings.size(),
            " timings for the ", list.size(), " actions of stage ", stage);
  nlohmann::json actions = nlohmann::json::array();
  for (size_t k = 0; k < list.size(); ++k)
    actions.push_back({{"action", pipeline::to_string(list[k])},
                       {"start", timings[k].start},
                       {"end", timings[k].end}});
  const std::filesystem::path d(dir);
  std::filesystem::create_directories(d);
  const std::string file = (d / format("stage", stage, "_actions.json")).string();
  checkpoint::write_json_atomically(
      file, {{"stage", stage},
             {"stages", s.num_stages()},
             {"micro_batches", s.microbatches},
             {"schedule", schedule_name(trainer)},
             {"emulated_world", trainer.world().size()},
             {"seconds", timings.empty() ? 0.0 : timings.back().end},
             {"actions", actions}});
  return format("stage ", stage, "'s measured actions of the last step (emulated rank: the "
                "other stages did not run, so no pipeline timeline): ", file, "\n");
}

}  // namespace

std::string draw_schedule(const Trainer& trainer, const std::string& dir) {
  const pipeline::StageExecutor* executor = trainer.pipeline_executor();
  SDP_CHECK(executor, "draw_schedule: the trainer has no step executor");
  const pipeline::Schedule& s = executor->schedule();
  std::filesystem::create_directories(dir);
  pipeline::save_schedule(s, (std::filesystem::path(dir) / "schedule.json").string());
  const pipeline::SimulationResult sim = pipeline::simulate(s);
  pipeline::write_timeline_svg((std::filesystem::path(dir) / "schedule.svg").string(),
                               {{format(schedule_name(trainer), ": ", s.num_stages(),
                                        " stages, ", s.microbatches, " micro-batches, uniform "
                                        "costs (F = I = W = 1, B = 2)"),
                                 s, sim}},
                               {.time_unit = ""});
  return format("schedule ", schedule_name(trainer), " at uniform costs: step ",
                format_fixed(sim.makespan, 0), " units (", dir, "/schedule.svg)\n",
                stage_table(s, sim.bubble_fraction, &sim.peak_live_activations, nullptr));
}

std::string write_measured_timeline(Trainer& trainer, const std::string& dir) {
  const pipeline::StageExecutor* executor = trainer.pipeline_executor();
  SDP_CHECK(executor, "write_measured_timeline: the trainer has no step executor");
  comm::Communicator& w = trainer.world();
  const pipeline::Schedule& s = executor->schedule();
  if (!w.moves_data()) return write_stage_actions(trainer, dir);
  const SubnetLayout& L = trainer.layout();
  size_t longest = 0;
  for (const auto& list : s.stages) longest = std::max(longest, list.size());
  // [world][longest][start, end], NaN past a stage's list.
  static CpuAllocator host;
  const int64_t K = static_cast<int64_t>(2 * longest);
  OwnedTensor mine(host, {K}, DType::f64, MemCategory::comm);
  OwnedTensor all(host, {K * w.size()}, DType::f64, MemCategory::comm);
  double* m = mine->data<double>();
  std::fill(m, m + K, std::numeric_limits<double>::quiet_NaN());
  const auto& timings = trainer.last_stage_timings();
  for (size_t k = 0; k < timings.size(); ++k) {
    m[2 * k] = timings[k].start;
    m[2 * k + 1] = timings[k].end;
  }
  w.all_gather(*mine, *all);
  if (w.rank() != 0) return "";
  pipeline::Timeline measured;
  const double* a = all->data<double>();
  for (int st = 0; st < s.num_stages(); ++st) {
    const double* from = a + K * L.mesh.rank_at(st, 0);  // replica 0's rank of the stage
    std::vector<pipeline::ActionTiming> row;
    for (size_t k = 0; k < s.stages[static_cast<size_t>(st)].size(); ++k)
      row.push_back({from[2 * k], from[2 * k + 1]});
    measured.timings.push_back(std::move(row));
  }
  // One message across each boundary: the activation the next stage receives.
  const Model& model = trainer.model();
  std::vector<int64_t> boundary;
  for (int st = 1; st < s.num_stages(); ++st) {
    const Shape shape =
        model.stage_input_shape(trainer.train_data().inputs(), L.stages[static_cast<size_t>(st)].first_block);
    boundary.push_back(shape.numel() * static_cast<int64_t>(dtype_size(model.dtype())));
  }
  const pipeline::SimulationCosts costs = pipeline::measured_costs(s, measured, boundary);
  const pipeline::SimulationResult sim = pipeline::simulate(s, costs);
  const pipeline::TimelineStats stats = pipeline::timeline_stats(s, measured);
  const std::filesystem::path d(dir);
  std::filesystem::create_directories(d);
  pipeline::save_timeline((d / "timeline.json").string(), s, measured);
  checkpoint::write_json_atomically((d / "costs.json").string(), pipeline::costs_to_json(costs));
  const std::string name = schedule_name(trainer);
  pipeline::write_timeline_svg(
      (d / "timeline.svg").string(),
      {{format(name, ": simulated from the measured action costs"), s, sim},
       {format(name, ": measured (last step, replica 0)"), s, measured}});
  return format("pipeline timeline of the last step (", dir, "/timeline.svg): measured ",
                format_fixed(stats.makespan * 1e3, 2), " ms, simulated from its action costs ",
                format_fixed(sim.makespan * 1e3, 2), " ms\n",
                stage_table(s, sim.bubble_fraction, nullptr, &stats.bubble_fraction));
}

}  // namespace sdp::app
