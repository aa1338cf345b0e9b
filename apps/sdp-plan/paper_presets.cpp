#include "apps/sdp-plan/paper_presets.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "apps/sdp-plan/number_text.h"
#include "apps/sdp-plan/report.h"
#include "engine/core/error.h"
#include "engine/parallel/strategy_table.h"

namespace sdp::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMB = 1e6;

// The paper's LLaMA planner tables: DDP and the four variants at its C values.
constexpr const char* kLlamaStrategies =
    "ddp,b-sdp:0.69,b-sdp:0.5,b-sdp:0.375,n-sdp:0.69,n-sdp:0.5,n-sdp:0.375,bb-sdp:0.69,"
    "bb-sdp:0.5,bb-sdp:0.375,nb-sdp:0.69,nb-sdp:0.5,nb-sdp:0.375";
constexpr const char* kLlamaPapersParts =
    "the model size, 8 workers, C = 0.69, 0.5 and 0.375 and the four SDP variants";
constexpr const char* kLlamaInferred =
    "batch 8 x 1024 tokens per rank and f32 parameters, gradients and AdamW moments (the "
    "paper's per-GPU batch and precision are not among its figures carried here; forward "
    "masking's saving hardly depends on them, docs/planning.md); the model's shapes are ours "
    "(sdp-train --list-models), with an untied head";
constexpr const char* kImagePapersParts =
    "the model on 32 x 32 CIFAR images, DDP against B-SDP and N-SDP";
constexpr const char* kImageInferred =
    "8 ranks, batch 128 images per rank, f32 and the C values (the paper's figures carried "
    "here give only memory ratios, at the accuracy it reports); N-SDP's groups are sdp-plan's "
    "defaults";

std::vector<PaperPreset> build_presets() {
  std::vector<PaperPreset> all;
  auto llama = [&](const std::string& size, const std::string& model) {
    std::string shown = size;  // 1B, 500M
    for (char& ch : shown) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    PaperPreset p;
    p.name = "sdp-llama-" + size;
    p.title = "LLaMA-" + shown + " planner table: DDP and B-SDP, N-SDP, Bb-SDP, Nb-SDP at C = "
              "0.69, 0.5, 0.375 on 8 workers";
    p.source = "the SDP paper's LLaMA memory and communication table (" + shown + " model)";
    p.model = model;
    p.world = 8;
    p.batch = 8;
    p.seq = 1024;
    p.dtype = "f32";
    p.strategies = kLlamaStrategies;
    p.papers_parts = kLlamaPapersParts;
    p.inferred = kLlamaInferred;
    return p;
  };
  all.push_back(llama("134m", "llama-134m"));  // the paper's 134M figures are not carried here

  PaperPreset p500 = llama("500m", "llama-500m");
  const char* unnamed = "the figure does not name the variant: set beside B-SDP and N-SDP";
  p500.figures = {
      {"500M peak-memory saving vs DDP at C = 0.5", "b-sdp:0.5", PaperMetric::saving, 0.40,
       true, unnamed},
      {"500M peak-memory saving vs DDP at C = 0.5", "n-sdp:0.5", PaperMetric::saving, 0.40,
       true, unnamed},
  };
  all.push_back(p500);

  PaperPreset p1b = llama("1b", "llama-1b");
  p1b.figures = {
      {"1B peak-memory saving vs DDP at C = 0.69 (8 workers: 11 of 16 blocks each)",
       "b-sdp:0.69", PaperMetric::saving, 0.28, true, ""},
      {"1B communication per worker per step, DDP", "ddp", PaperMetric::sent, 3143, false, ""},
      {"1B communication per worker per step, SDP at C = 0.69", "b-sdp:0.69", PaperMetric::sent,
       2253, false, "B-SDP and N-SDP send the same bytes"},
  };
  all.push_back(p1b);

  PaperPreset c;
  c.name = "sdp-composition";
  c.title = "LLaMA-1B composition: DDP, FSDP + AC, B-SDP + FSDP + AC (and the steps between)";
  c.source = "the SDP paper's composition figure (peak memory per GPU of LLaMA-1B)";
  c.model = "llama-1b";
  c.world = 16;
  c.batch = 48;
  c.seq = 1024;
  c.dtype = "bf16";
  c.strategies =
      "ddp,fsdp,fsdp+ac,b-sdp:0.6875,b-sdp:0.6875+ac,b-sdp:0.6875+fsdp,b-sdp:0.6875+fsdp+ac";
  c.papers_parts =
      "LLaMA-1B, the compositions DDP, FSDP + activation checkpointing and B-SDP + FSDP + "
      "activation checkpointing, C = 0.6875 (11 of 16 blocks)";
  c.inferred =
      "16 ranks, bf16 parameters with f32 masters (f32 gradients and AdamW moments) and 48 x "
      "1024 tokens per rank: a sweep over ranks, precision and tokens per rank found the setup "
      "whose three peaks come nearest the paper's (its GB read as GiB); the rows FSDP, B-SDP, "
      "B-SDP + AC and B-SDP + FSDP are ours, the steps between";
  c.figures = {
      {"peak memory per GPU, DDP", "ddp", PaperMetric::peak, 70.9, false, ""},
      {"peak memory per GPU, FSDP + AC", "fsdp+ac", PaperMetric::peak, 11.0, false, ""},
      {"peak memory per GPU, B-SDP + FSDP + AC", "b-sdp:0.6875+fsdp+ac", PaperMetric::peak, 9.7,
       false, ""},
  };
  all.push_back(c);

  auto image = [&](const std::string& name, const std::string& model, const std::string& shown,
                   const std::string& strategies) {
    PaperPreset p;
    p.name = name;
    p.title = shown + " on CIFAR: peak memory per rank, DDP against B-SDP and N-SDP on 8 ranks";
    p.source = "the SDP paper's CIFAR results for " + shown + " (accuracy at a memory ratio)";
    p.model = model;
    p.world = 8;
    p.batch = 128;
    p.dtype = "f32";
    p.strategies = strategies;
    p.papers_parts = kImagePapersParts;
    p.inferred = kImageInferred;
    return p;
  };
  const std::string resnet_items =
      "ddp,b-sdp:0.75,b-sdp:0.5,b-sdp:0.375,n-sdp:0.75,n-sdp:0.5,n-sdp:0.375";
  const std::vector<PaperFigure> resnet_figures = {
      {"SDP at DDP's accuracy with 40% of DDP's memory", "sdp", PaperMetric::peak_ratio, 0.40,
       false, "variant and C not named: the nearest SDP row"},
      {"N-SDP better than DDP at 64% of DDP's memory", "n-sdp", PaperMetric::peak_ratio, 0.64,
       false, "C not named: the nearest N-SDP row"},
  };
  all.push_back(image("sdp-resnet18", "resnet18", "ResNet-18", resnet_items));
  all.back().figures = resnet_figures;
  all.push_back(image("sdp-wrn18", "wrn18", "WRN-18", resnet_items));
  all.back().figures = resnet_figures;
  all.push_back(image("sdp-swin-t", "swin-t", "Swin-T",
                      "ddp,b-sdp:0.75,b-sdp:0.6875,b-sdp:0.5,b-sdp:0.375,n-sdp:0.75,"
                      "n-sdp:0.6875,n-sdp:0.5,n-sdp:0.375"));
  all.back().figures = {
      {"B-SDP at DDP's CIFAR-10 accuracy with 68% of DDP's memory (CIFAR-100: about 2 points "
       "better at 32% less)",
       "b-sdp", PaperMetric::peak_ratio, 0.68, false, "C not named: the nearest B-SDP row"},
  };
  return all;
}

std::string metric_name(PaperMetric m) {
  switch (m) {
    case PaperMetric::peak: return "peak_gb";
    case PaperMetric::saving: return "saving_vs_ddp";
    case PaperMetric::peak_ratio: return "peak_vs_ddp";
    case PaperMetric::sent: return "sent_mb_per_rank";
  }
  return "";
}

const StrategySteps& baseline(const PlanReport& rep) {
  return rep.strategies[static_cast<size_t>(rep.job.baseline)];
}

// Our figure of `s` in the paper's unit: GiB (set beside the paper's GB),
// a fraction, or decimal MB.
double ours(const PlanReport& rep, const StrategySteps& s, PaperMetric m) {
  const double ddp_peak = baseline(rep).peak().max;
  switch (m) {
    case PaperMetric::peak: return s.peak().max / kGiB;
    case PaperMetric::saving: return 1 - s.peak().max / ddp_peak;
    case PaperMetric::peak_ratio: return s.peak().max / ddp_peak;
    case PaperMetric::sent: return s.sent().mean / kMB;
  }
  return 0;
}

// Every collective's whole buffer counted once (no ring factor), mean over
// ranks: what a rank puts into its reductions and gathers, and a broadcast's
// buffer at its root only (the root is the one rank that sends it).
double payload_mean(const StrategySteps& s) {
  if (s.ranks.empty()) return 0;
  double sum = 0;
  for (const RankStep& r : s.ranks) {
    if (!r.comm) continue;
    const comm::Traffic& broadcast = r.comm->by_op(comm::Op::broadcast);
    sum += static_cast<double>(r.comm->total().payload_bytes - broadcast.payload_bytes) +
           broadcast.sent_bytes;
  }
  return sum / static_cast<double>(s.ranks.size());
}

bool takes_fraction(const std::string& strategy) {
  const auto* s = find_strategy(strategy);
  return s != nullptr && s->takes_fraction;
}

// The row of ours a figure stands beside; null when the run has none (its
// --strategies overridden).
const StrategySteps* row_for(const PlanReport& rep, const PaperFigure& f) {
  const bool nearest = f.item == "sdp" || takes_fraction(f.item);  // no C: the nearest row
  if (!nearest) {
    for (const StrategySteps& s : rep.strategies)
      if (s.request.text == f.item) return &s;
    return nullptr;
  }
  const StrategySteps* best = nullptr;
  double gap = std::numeric_limits<double>::infinity();
  for (const StrategySteps& s : rep.strategies) {
    if (!takes_fraction(s.request.strategy) || s.request.shard || s.request.recompute.enabled())
      continue;
    if (f.item != "sdp" && s.request.strategy != f.item) continue;
    const double d = std::fabs(ours(rep, s, f.metric) - f.value);
    if (d < gap) {
      gap = d;
      best = &s;
    }
  }
  return best;
}

std::string shown(PaperMetric m, double v) {
  switch (m) {
    case PaperMetric::peak: return fixed(v, 2);
    case PaperMetric::saving:
    case PaperMetric::peak_ratio: return fixed(100 * v, 1) + "%";
    case PaperMetric::sent: return fixed(v, 0);
  }
  return "";
}

std::string unit_of(PaperMetric m) {
  switch (m) {
    case PaperMetric::peak: return " GiB";
    case PaperMetric::sent: return " MB";
    default: return "";
  }
}

// "B-SDP C = 0.69, 12 of 16 per rank": the C asked for and what the plan
// gave the busiest rank (with C rounded to whole owners per component, more
// than C of the components).
std::string row_name(const StrategySteps& s) {
  if (!takes_fraction(s.request.strategy)) return s.label;
  char c[32];
  std::snprintf(c, sizeof c, "%g", s.request.active_fraction);
  return format(s.label, " C = ", c, ", ", s.owned_max, " of ", s.components, " per rank");
}

const PaperPreset* preset_of(const PlanReport& rep) {
  return rep.job.paper.empty() ? nullptr : &find_paper_preset(rep.job.paper);
}

}  // namespace

const std::vector<PaperPreset>& paper_presets() {
  static const std::vector<PaperPreset> all = build_presets();
  return all;
}

std::string paper_preset_names() {
  std::string out;
  for (const PaperPreset& p : paper_presets()) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

const PaperPreset& find_paper_preset(const std::string& name) {
  for (const PaperPreset& p : paper_presets())
    if (p.name == name) return p;
  fail("--paper = '", name, "' is not a setup of the paper (valid: ", paper_preset_names(),
       "; --paper list describes them)");
}

std::string paper_preset_list() {
  std::string out = "The SDP paper's setups (sdp-plan --paper NAME):\n";
  for (const PaperPreset& p : paper_presets()) out += format("  ", p.name, "  ", p.title, "\n");
  return out;
}

void add_paper_option(CLI::App& app, PlanOptions& o) {
  app.add_option_function<std::string>(
         "--paper",
         [&app, &o](const std::string& name) {
           o.paper = name;
           app.get_option("--model")->required(false);
           app.get_option("--world")->required(false);
           if (name == "list") return;
           const PaperPreset& p = find_paper_preset(name);
           o.base.model = p.model;
           o.world = p.world;
           o.base.batch = p.batch;
           if (p.seq > 0) o.base.seq = p.seq;
           o.base.dtype = p.dtype;
           o.strategies = p.strategies;
         },
         format("Run one of the SDP paper's setups and print our figures beside the paper's (",
                paper_preset_names(), "; list: describe them). Flags given beside it override "
                "the preset (the report names them)"))
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            if (name == "list") return "";
            for (const PaperPreset& p : paper_presets())
              if (p.name == name) return "";
            return format("'", name, "' is not a setup of the paper (valid: ",
                          paper_preset_names(), "; --paper list describes them)");
          },
          "NAME"));
}

std::vector<std::string> paper_overrides(const CLI::App& app) {
  std::vector<std::string> given;
  for (const char* flag : {"--model", "--world", "--batch", "--seq", "--dtype", "--strategies",
                           "--grad-accum", "--plan", "--plan-seed", "--ffn-groups",
                           "--head-groups", "--channel-groups", "--data", "--pipeline-stages",
                           "--vocab-size", "--layers", "--rank-memory", "--device",
                           "--grad-reduce-dtype"}) {
    const CLI::Option* option = app.get_option_no_throw(flag);
    if (option != nullptr && option->count() > 0) given.push_back(flag);
  }
  return given;
}

std::string paper_markdown(const PlanReport& rep) {
  const PaperPreset* p = preset_of(rep);
  if (p == nullptr) return "";
  std::string out = format("\n### Against the SDP paper: ", p->title, "\n\n", "Source: ",
                           p->source, ". The paper's: ", p->papers_parts, ". Inferred: ",
                           p->inferred, ".\n");
  if (!rep.job.paper_overrides.empty()) {
    std::string flags;
    for (const std::string& f : rep.job.paper_overrides) flags += (flags.empty() ? "" : ", ") + f;
    out += format("\nGiven beside --paper, replacing the preset's: ", flags,
                  ". The paper's figures below belong to the preset's setup, not to this run.\n");
  }
  if (p->figures.empty()) {
    out += "\nThe paper's figures for this setup are not among those sdp-plan carries: the "
           "tables above are ours alone.\n";
  } else {
    out += "\n| the paper's figure | paper | ours | ours / paper | our row |\n"
           "|---|---:|---:|---:|---|\n";
    for (const PaperFigure& f : p->figures) {
      const StrategySteps* s = row_for(rep, f);
      const std::string paper =
          (f.approximate ? "~" : "") + shown(f.metric, f.value) +
          (f.metric == PaperMetric::peak ? " GB" : f.metric == PaperMetric::sent ? " MB" : "");
      if (s == nullptr) {
        out += format("| ", f.what, " | ", paper, " | not in this run | | ", f.item, " |\n");
        continue;
      }
      const double v = ours(rep, *s, f.metric);
      out += format("| ", f.what, " | ", paper, " | ", shown(f.metric, v), unit_of(f.metric),
                    " | ", fixed(v / f.value, 3), " | ", row_name(*s),
                    f.note.empty() ? std::string() : " (" + f.note + ")", " |\n");
    }
    bool peaks = false;
    for (const PaperFigure& f : p->figures) peaks |= f.metric == PaperMetric::peak;
    if (peaks)
      out += "\nPeaks: ours in GiB (2^30 bytes) beside the paper's GB, as the sweep matched "
             "them (in 10^9 bytes ours are 7.4% larger).\n";
  }
  // Communication under two conventions (docs/planning.md "Communication
  // against the paper" counts which tensors go where).
  out += "\nCommunication per rank per step, MB = 10^6 bytes, counted two ways: as sent "
         "(each rank's bytes on the wire by the ring formulas: an all-reduce of S bytes on k "
         "ranks sends 2 (k - 1) / k S) and each collective's buffer once (S per call, no ring "
         "factor). docs/planning.md (\"Communication against the paper\") counts the gap to "
         "the paper's figures tensor by tensor.\n\n"
         "| our row | sent (ring) MB | buffers once MB | paper MB | paper / sent | paper / "
         "buffers once |\n|---|---:|---:|---:|---:|---:|\n";
  for (const StrategySteps& s : rep.strategies) {
    const double sent = s.sent().mean / kMB, once = payload_mean(s) / kMB;
    std::string paper = "", by_sent = "", by_once = "";
    for (const PaperFigure& f : p->figures)
      if (f.metric == PaperMetric::sent && row_for(rep, f) == &s) {
        paper = fixed(f.value, 0);
        by_sent = fixed(f.value / sent, 3);
        by_once = fixed(f.value / once, 3);
      }
    out += format("| ", row_name(s), " | ", fixed(sent, 1), " | ", fixed(once, 1), " | ",
                  paper, " | ", by_sent, " | ", by_once, " |\n");
  }
  return out;
}

nlohmann::json paper_json(const PlanReport& rep) {
  const PaperPreset* p = preset_of(rep);
  if (p == nullptr) return nullptr;
  nlohmann::json figures = nlohmann::json::array();
  for (const PaperFigure& f : p->figures) {
    const StrategySteps* s = row_for(rep, f);
    figures.push_back({{"what", f.what},
                       {"item", f.item},
                       {"metric", metric_name(f.metric)},
                       {"paper", f.value},
                       {"approximate", f.approximate},
                       {"note", f.note},
                       {"row", s ? nlohmann::json(s->request.text) : nlohmann::json()},
                       {"label", s ? nlohmann::json(s->label) : nlohmann::json()},
                       {"ours", s ? nlohmann::json(ours(rep, *s, f.metric)) : nlohmann::json()}});
  }
  nlohmann::json comm = nlohmann::json::array();
  for (const StrategySteps& s : rep.strategies)
    comm.push_back({{"row", s.request.text},
                    {"sent_bytes_mean", s.sent().mean},
                    {"buffer_bytes_mean", payload_mean(s)}});
  return {{"name", p->name},
          {"title", p->title},
          {"source", p->source},
          {"papers_parts", p->papers_parts},
          {"inferred", p->inferred},
          {"setup",
           {{"model", p->model},
            {"world", p->world},
            {"batch", p->batch},
            {"seq", p->seq > 0 ? nlohmann::json(p->seq) : nlohmann::json()},
            {"dtype", p->dtype},
            {"strategies", p->strategies}}},
          {"overrides", rep.job.paper_overrides},
          {"figures", figures},
          {"communication", comm}};
}

}  // namespace sdp::planner
