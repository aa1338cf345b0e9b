// sdp-plan: the memory/communication planner. For one model, a world of N
// ranks and a list of strategies, runs one meta-device training step of every
// rank (each emulated in this process, so no MPI and no accelerator are
// needed) and reports peak memory and bytes sent per rank against DDP.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <new>

#include <CLI/CLI.hpp>

#include "apps/sdp-plan/measure.h"
#include "apps/sdp-plan/plan_options.h"
#include "apps/sdp-plan/report.h"
#include "engine/core/error.h"

int main(int argc, char** argv) {
  using namespace sdp::planner;
  CLI::App app{
      "sdp-plan: per-rank peak memory and communication of DDP and SDP strategies for a LLaMA "
      "model on N ranks, from one meta-device step of every rank (no MPI, no GPU).\n"
      "Example: sdp-plan --model llama-1b --world 8 --strategies ddp,b-sdp:0.69,n-sdp:0.5 "
      "--batch 8 --seq 1024\n"
      "Pipelines: sdp-plan --model mini --world 4 --pipeline-stages 2 --micro-batches 4 "
      "--schedule 1f1b-2bp (per rank: its stage, activation peak, bytes to its neighbours and "
      "among its stage's replicas)"};
  app.get_formatter()->column_width(30);
  PlanOptions options;
  add_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    PlanReport report;
    report.job = resolve_job(options);
    const auto start = std::chrono::steady_clock::now();
    for (const StrategyRequest& s : report.job.strategies)
      report.strategies.push_back(measure_strategy(report.job, s));
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string text = render(report);
    if (report.job.output.empty()) {
      std::fputs(text.c_str(), stdout);
    } else {
      std::ofstream out(report.job.output);
      if (!out) sdp::fail("--output: cannot write '", report.job.output, "'");
      out << text;
      if (!out.flush()) sdp::fail("--output: writing '", report.job.output, "' failed");
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
