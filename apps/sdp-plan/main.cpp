// sdp-plan: the memory/communication planner. For one model, a world of N
// ranks and a list of strategies, runs a meta-device training step of every
// class of ranks (each rank emulated in this process, so no MPI and no
// accelerator are needed) and reports peak memory, bytes sent and the
// estimated step time per rank against DDP; --fit searches the
// configurations that fit a memory budget (apps/sdp-plan/fit.h).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <new>

#include <CLI/CLI.hpp>

#include "apps/cli_common.h"
#include "apps/sdp-plan/fit.h"
#include "apps/sdp-plan/measure.h"
#include "apps/sdp-plan/paper_presets.h"
#include "apps/sdp-plan/plan_options.h"
#include "apps/sdp-plan/report.h"
#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"
#include "engine/parallel/strategy_table.h"

namespace {

void write_text(const std::string& text, const std::string& path) {
  if (path.empty()) {
    std::fputs(text.c_str(), stdout);
    return;
  }
  std::ofstream out(path);
  if (!out) sdp::fail("--output: cannot write '", path, "'");
  out << text;
  if (!out.flush()) sdp::fail("--output: writing '", path, "' failed");
}

int run_fit(const sdp::planner::PlannerJob& job) {
  using namespace sdp::planner;
  const FitResult result = fit(job);
  write_text(render_fit(job, result), job.output);
  if (job.write_config.empty()) return 0;
  if (result.fitting.empty())
    sdp::fail("--write-config: no configuration fits ", job.fit_budget_bytes,
              " bytes per rank, so none was written");
  if (job.choose > static_cast<int>(result.fitting.size()))
    sdp::fail("--choose = ", job.choose, " but ", result.fitting.size(),
              " configurations fit (valid: 1 to ", result.fitting.size(), ")");
  const FitRow& row = result.fitting[static_cast<size_t>(job.choose - 1)];
  sdp::checkpoint::write_json_atomically(job.write_config, fit_config(job, row));
  std::fprintf(stderr, "sdp-plan: wrote row %d (%s, C = %g) to %s\n", job.choose,
               row.steps.label.c_str(), row.steps.request.active_fraction,
               job.write_config.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sdp::planner;
  using sdp::find_strategy;
  CLI::App app{
      "sdp-plan: per-rank peak memory, communication and estimated step time of DDP, FSDP and "
      "SDP compositions on N ranks, from meta-device steps (one per class of ranks holding the "
      "same plan row; no MPI, no GPU).\n"
      "Example: sdp-plan --model llama-1b --world 8 --strategies ddp,b-sdp:0.69,n-sdp:0.5 "
      "--batch 8 --seq 1024\n"
      "Fit a budget: sdp-plan --model llama-1b --world 64 --seq 1024 --tokens-per-rank 16384 "
      "--fit 24GiB --write-config fitted.json\n"
      "Uneven ranks: sdp-plan --model llama-1b --world 8 --rank-memory 80GiBx4,40GiBx4\n"
      "Pipelines: sdp-plan --model mini --world 4 --pipeline-stages 2 --micro-batches 4 "
      "--schedule 1f1b-2bp (per rank: its stage, activation peak, bytes to its neighbours and "
      "among its stage's replicas)\n"
      "The paper's setups, our figures beside the paper's: sdp-plan --paper sdp-composition "
      "(--paper list names them all)"};
  app.get_formatter()->column_width(30);
  PlanOptions options;
  add_options(app, options);
  sdp::app::add_version_flag(app, "sdp-plan");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return sdp::app::report_parse_error(app, "sdp-plan", e);
  }
  if (options.paper == "list") {
    std::fputs(paper_preset_list().c_str(), stdout);
    return 0;
  }
  if (!options.paper.empty()) options.paper_overrides = paper_overrides(app);
  try {
    PlanReport report;
    options.base.model = sdp::app::with_model_field_flags(options.base.model, options.model_fields);
    report.job = resolve_job(options);
    if (report.job.fit_budget_bytes > 0) return run_fit(report.job);
    const auto start = std::chrono::steady_clock::now();
    for (const StrategyRequest& s : report.job.strategies)
      report.strategies.push_back(measure_strategy(report.job, s));
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    write_text(render(report), report.job.output);
    if (!report.job.write_plan.empty())
      for (const StrategySteps& s : report.strategies)
        if (s.components > 0 && find_strategy(s.request.strategy)->takes_fraction) {
          sdp::checkpoint::write_json_atomically(report.job.write_plan, s.plan.to_json());
          std::fprintf(stderr, "sdp-plan: wrote the plan of %s (C = %g) to %s\n",
                       s.label.c_str(), s.request.active_fraction, report.job.write_plan.c_str());
        }
    return 0;
  } catch (const std::bad_alloc&) {
    // The sizes known up front (the plan's dense rank matrix) are checked
    // before allocating; this is memory that ran out elsewhere.
    std::fprintf(stderr,
                 "sdp-plan: error: out of host memory (an allocation failed while planning "
                 "%lld ranks); a smaller --world or model, or more free memory, is needed\n",
                 static_cast<long long>(options.world));
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sdp-plan: error: %s\n", e.what());
    return 2;
  }
}
