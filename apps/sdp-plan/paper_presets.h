#pragma once
// The SDP paper's setups as sdp-plan jobs (--paper NAME). A preset only fills
// the options a user could give as flags (model, world, batch, seq, dtype,
// strategies with the paper's C), so it runs the same code path as the flags;
// the paper's own figures for that setup, and the table or figure they come
// from, live here and nowhere else (bench/paper_tables.py and the scripts it
// runs read them from `sdp-plan --paper NAME --format json`). The report then
// prints our figures beside the paper's and says which parts of the setup are
// the paper's and which were inferred. Flags given beside --paper override
// the preset's values; the report names each one, since the paper's figures
// belong to the preset's setup.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/sdp-plan/plan_options.h"

namespace sdp::planner {

struct PlanReport;

// What a paper figure measures, and so which of our figures it is set beside.
enum class PaperMetric {
  peak,        // highest per-rank peak memory (the paper's GB)
  saving,      // 1 - peak / DDP's peak
  peak_ratio,  // peak / DDP's peak
  sent,        // communication per rank per step (the paper's MB)
};

struct PaperFigure {
  std::string what;  // the figure in words, e.g. "1B peak-memory saving vs DDP at C = 0.69"
  // The --strategies item of ours it stands beside ("b-sdp:0.69"), or a
  // strategy name alone ("n-sdp") when the paper does not give C: then the
  // row of that strategy nearest the paper's value (any SDP row for "sdp").
  std::string item;
  PaperMetric metric = PaperMetric::peak;
  double value = 0;  // GB, a fraction, or MB (decimal, as the paper prints them)
  bool approximate = false;  // the paper gives "~value"
  std::string note;          // what the paper leaves open
};

struct PaperPreset {
  std::string name;    // --paper NAME
  std::string title;   // one line
  std::string source;  // which table or figure of the paper
  // The job: every field is one a flag sets.
  std::string model;
  int64_t world = 0;
  int64_t batch = 0;
  int64_t seq = 0;  // 0: the flag's default (image models take none)
  std::string dtype;
  std::string strategies;
  std::string papers_parts;  // which parts of the setup are the paper's
  std::string inferred;      // which are not, and how they were chosen
  std::vector<PaperFigure> figures;
};

const std::vector<PaperPreset>& paper_presets();
// "sdp-llama-134m, sdp-llama-500m, ..." for messages.
std::string paper_preset_names();
// The preset named `name`; throws sdp::Error listing the valid names.
const PaperPreset& find_paper_preset(const std::string& name);
// `--paper list`: every name with its title, one a line.
std::string paper_preset_list();

// Adds --paper NAME to `app`. Call it before the flags it fills are added:
// CLI11 runs option callbacks in the order the options were added, so the
// preset's values are set first and a flag given beside --paper replaces
// them. It also lifts the requirement of --model and --world, which the
// preset gives.
void add_paper_option(CLI::App& app, PlanOptions& options);
// After parsing: the flags of the command line that change a preset's setup.
std::vector<std::string> paper_overrides(const CLI::App& app);

// The comparison with the paper (report.cpp appends it; empty without --paper).
std::string paper_markdown(const PlanReport& report);
nlohmann::json paper_json(const PlanReport& report);  // null without --paper

}  // namespace sdp::planner
