// sdp-pipeline: simulates pipeline schedules for P stages and M micro-batches
// under per-stage costs and a link model (engine/pipeline/schedule_simulator.h),
// prints step time, bubbles and peak memory per schedule, and draws their
// timelines into one SVG (engine/pipeline/timeline_svg.h). No GPU, no MPI.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/cli_common.h"
#include "apps/integer_option.h"
#include "apps/training_options.h"
#include "engine/pipeline/costs_json.h"
#include "apps/sdp-pipeline/model_costs.h"
#include "apps/sdp-pipeline/report.h"
#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"
#include "engine/checkpoint/output_path.h"
#include "engine/pipeline/timeline_svg.h"

namespace {

using namespace sdp;
using namespace sdp::pipeline;
using namespace sdp::pipeline_tool;


struct Options {
  std::string schedule = "1f1b";
  std::string compare;
  int stages = 0;        // 0: not given
  int microbatches = 0;  // 0: not given
  std::string costs;
  std::string svg;
  bool json = false;
  // Costs from a model instead of a file (model_costs.h).
  std::string model;
  int64_t batch = 0, seq = 0;  // 0: not given
  std::string stage_blocks, dtype = "f32";
  double flops_per_second = 0;
  std::string calibrate, calibrate_model, calibrate_stage_blocks;
  int64_t calibrate_batch = 0, calibrate_seq = 0;  // 0: the simulated case's
  std::string write_costs;
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
    // The same reading and checks as sdp-train's schedule = file:PATH, and
    // the same message after the flag.
    Schedule s;
    try {
      s = load_valid_schedule(spec.substr(prefix.size()));
    } catch (const Error& e) {
      fail(flag, " '", spec, "': ", e.what());
    }
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

DType parse_dtype(const std::string& name) {
  if (name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  fail("--dtype '", name, "' is invalid (valid: f32, bf16)");
}

// One number as printf's `format` writes it ("%.2f", "%.6g", "%.0f").
std::string printed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string column(const std::string& v, size_t width) {
  return v.size() >= width ? v + " " : v + std::string(width - v.size(), ' ');
}

// The model case's per-stage figures, printed above the schedules' table.

std::string stage_table(const ModelStages& m, const pipeline::SimulationCosts& costs) {
  std::string out = "model costs: " + m.model_case.describe() + "\n";
  out += "stage  blocks      F FLOPs         I FLOPs         W FLOPs         F s         I s         W s         "
         "act bytes     W bytes       recv bytes    params\n";
  const auto col = column;
  const auto g = [](double v) { return printed("%.6g", v); };
  const auto whole = [](double v) { return printed("%.0f", v); };  // FLOPs are whole numbers
  for (size_t s = 0; s < m.stages.size(); ++s) {
    const ModelStage& st = m.stages[s];
    const StageSpan& span = st.flops.span;
    out += col(std::to_string(s), 7) +
           col(std::to_string(span.first_block) + "-" + std::to_string(span.end(m.blocks) - 1), 12) +
           col(whole(st.flops.forward_flops), 16) + col(whole(st.flops.backward_input_flops), 16) +
           col(whole(st.flops.backward_weight_flops), 16) + col(g(costs.stages[s].forward), 12) +
           col(g(costs.stages[s].input_grad), 12) + col(g(costs.stages[s].weight_grad), 12) +
           col(std::to_string(st.activation_bytes), 14) + col(std::to_string(st.weight_grad_bytes), 14) +
           col(std::to_string(st.flops.received_bytes), 14) + std::to_string(st.flops.param_numel) + "\n";
  }
  out += "F / I / W FLOPs: exact counts of the ops run (kernels/flop_count.h); act bytes: activation bytes "
         "one micro-batch holds after its forward, W bytes: still held after a split backward (meta device, "
         "mirroring the CUDA allocator's 512-byte blocks); recv bytes: the activation received from the "
         "previous stage\n\n";
  return out;
}

// The costs the model case gives, with its table for the report.
// The per-stage figures and rates of the model case, for --json.
nlohmann::json model_json(const ModelStages& m, const ComputeRates& rates, const std::vector<double>& error) {
  nlohmann::json stages = nlohmann::json::array();
  for (const ModelStage& s : m.stages)
    stages.push_back({{"first_block", s.flops.span.first_block},
                      {"end_block", s.flops.span.end(m.blocks)},
                      {"forward_flops", s.flops.forward_flops},
                      {"input_grad_flops", s.flops.backward_input_flops},
                      {"weight_grad_flops", s.flops.backward_weight_flops},
                      {"activation_bytes", s.activation_bytes},
                      {"weight_grad_bytes", s.weight_grad_bytes},
                      {"received_bytes", s.flops.received_bytes},
                      {"param_numel", s.flops.param_numel}});
  return {{"case", m.model_case.describe()},
          {"model", m.model_case.model},
          {"blocks", m.blocks},
          {"stages", stages},
          {"rates", {{"forward", rates.forward}, {"input_grad", rates.input_grad}, {"weight_grad", rates.weight_grad}}},
          {"rates_source", rates.source},
          {"calibration_stage_error", error}};
}

pipeline::SimulationCosts costs_from_model(const Options& o, int P, std::string& table, std::string& source,
                                           nlohmann::json& json) {
  if (o.batch < 1 || o.seq < 1) fail("--model ", o.model, " needs --batch and --seq (both >= 1)");
  if (!o.costs.empty()) fail("--model and --costs are exclusive (costs come from one or the other)");
  if ((o.flops_per_second > 0) == !o.calibrate.empty())
    fail("--model needs exactly one of --flops-per-second X or --calibrate costs.json (FLOPs to seconds)");
  if (o.calibrate.empty() && (!o.calibrate_model.empty() || o.calibrate_batch || o.calibrate_seq ||
                              !o.calibrate_stage_blocks.empty()))
    fail("--calibrate-model, --calibrate-batch, --calibrate-seq and --calibrate-stage-blocks describe the "
         "run of a --calibrate file; give --calibrate costs.json");
  ModelCase c{o.model, o.batch, o.seq, P, o.stage_blocks, parse_dtype(o.dtype)};
  const ModelStages stages = count_model_stages(c);
  ComputeRates rates;
  std::string calibration;
  std::vector<double> error;
  if (o.flops_per_second > 0) {
    rates = uniform_rates(o.flops_per_second);
  } else {
    const pipeline::SimulationCosts measured_costs = read_measured_costs(o.calibrate);
    const size_t measured_stages = measured_costs.stages.size();
    // The measured run: the same model, micro-batch and split unless told;
    // always f32 (a CPU run) unless --dtype says otherwise.
    ModelCase m{o.calibrate_model.empty() ? o.model : o.calibrate_model,
                o.calibrate_batch ? o.calibrate_batch : o.batch, o.calibrate_seq ? o.calibrate_seq : o.seq,
                static_cast<int>(measured_stages), o.calibrate_stage_blocks, c.dtype};
    if (model_family(m.model) != model_family(c.model))
      fail("--calibrate-model ", m.model, " is a ", model_family_name(model_family(m.model)), " model, --model ",
           c.model, " a ", model_family_name(model_family(c.model)),
           " one (valid: a measured run of the same family)");
    const ModelStages measured = count_model_stages(m);
    rates = calibrated_rates(measured, measured_costs, &error, o.calibrate);
    calibration = "calibration on " + o.calibrate + ": per measured stage, largest error of F, I, W times:";
    for (size_t s = 0; s < error.size(); ++s) calibration += " stage " + std::to_string(s) + " " + printed("%.2f", 100 * error[s]) + "%";
    calibration += "\n\n";
  }
  const pipeline::SimulationCosts costs = model_costs(stages, rates);
  table = stage_table(stages, costs) + calibration;
  json = model_json(stages, rates, error);
  source = "model " + o.model + ", " + rates.source;
  if (!o.write_costs.empty()) checkpoint::write_json_atomically(o.write_costs, pipeline::costs_to_json(costs));
  return costs;
}

int run(const Options& o) {
  // Both files are written at the end: checked before anything is simulated.
  checkpoint::check_output_paths({{"--svg", "timeline SVG", o.svg},
                                  {"--write-costs", "costs file", o.write_costs}});
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
  std::string model_table;
  nlohmann::json model_figures;
  if (!o.model.empty()) {
    costs = costs_from_model(o, P, model_table, report.costs_source, model_figures);
  } else {
    if (o.batch || o.seq || !o.stage_blocks.empty() || o.flops_per_second > 0 || !o.calibrate.empty() ||
        !o.write_costs.empty())
      fail("--batch, --seq, --stage-blocks, --flops-per-second, --calibrate and --write-costs need --model");
    if (!o.costs.empty()) {
      costs = pipeline::load_costs(o.costs, P);
      report.costs_source = o.costs;
    }
  }
  for (auto& s : report.schedules) s.result = simulate(s.schedule, costs);

  if (o.json) {
    nlohmann::json j = render_json(report);
    if (!model_figures.is_null()) j["model"] = model_figures;
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
  } else {
    std::fputs((model_table + render_text(report)).c_str(), stdout);
  }
  if (!o.svg.empty()) {
    std::vector<TimelinePanel> panels;
    for (const auto& s : report.schedules) panels.push_back({s.name, s.schedule, s.result});
    SvgOptions svg;
    // The default costs are in no particular unit; a costs file's are seconds.
    svg.time_unit = o.costs.empty() && o.model.empty() ? "units" : "s";
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
  app.add_option("--model", o.model,
                 "Costs from this named model instead of a file: per stage the counted FLOPs of F, I, W "
                 "and the bytes one micro-batch holds, measured on the meta device (needs --batch, --seq "
                 "and --flops-per-second or --calibrate)");
  app.add_option("--batch", o.batch, "With --model: sequences (images) per micro-batch")
      ->check(app::integer_in(int64_t{1}, int64_t{1} << 20));
  app.add_option("--seq", o.seq, "With --model: tokens per sequence (ResNet: the image side, 32 for CIFAR; a "
                 "Swin uses its own)")
      ->check(app::integer_in(int64_t{1}, int64_t{1} << 20));
  app::add_training_option(app, o.stage_blocks, "stage_blocks");  // with --model
  app.add_option("--dtype", o.dtype, "With --model: parameter dtype, f32 or bf16")->capture_default_str();
  app.add_option("--flops-per-second", o.flops_per_second, "With --model: one rate turning FLOPs into seconds");
  app.add_option("--calibrate", o.calibrate,
                 "With --model: a costs.json of a measured sdp-train run (--pipeline-timeline) of the same "
                 "family; rates per kind F, I, W = its counted FLOPs / its measured seconds");
  app.add_option("--calibrate-model", o.calibrate_model, "The measured run's model (default --model)");
  app.add_option("--calibrate-batch", o.calibrate_batch, "The measured run's --batch (default --batch)")
      ->check(app::integer_in(int64_t{1}, int64_t{1} << 20));
  app.add_option("--calibrate-seq", o.calibrate_seq, "The measured run's --seq (default --seq)")
      ->check(app::integer_in(int64_t{1}, int64_t{1} << 20));
  app.add_option("--calibrate-stage-blocks", o.calibrate_stage_blocks,
                 "The measured run's --stage-blocks (default: balanced, as sdp-train)");
  app.add_option("--write-costs", o.write_costs, "With --model: write the derived costs file there");
  app.add_flag("--json", o.json, "Print the figures and timelines as JSON instead of the table");
  app::add_version_flag(app, "sdp-pipeline");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other parse error is bad input, like the rest.
    return app::report_parse_error(app, "sdp-pipeline", e) == 0 ? 0 : 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sdp-pipeline: error: %s\n", e.what());
    return 2;
  }
}
