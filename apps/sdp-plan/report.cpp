#include "apps/sdp-plan/report.h"

#include "apps/sdp-plan/number_text.h"
#include "apps/sdp-plan/paper_presets.h"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>

#include "engine/core/device_target.h"
#include "engine/core/error.h"
#include "engine/core/memory_stats.h"
#include "engine/parallel/strategy.h"
#include "engine/train/batch_loader.h"
#include "models/registry.h"

namespace sdp::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kMB = 1e6;  // communication is quoted in decimal MB, as the SDP paper does

// Memory in GiB, or in MiB for models whose DDP peak is under 1 GiB (where
// GiB would print zeros); communication with more decimals below 100 MB.
struct Units {
  double memory = kGiB;
  const char* memory_name = "GiB";
  int comm_digits = 1;
  double flops = 1e12;  // TFLOP, or GFLOP when DDP computes under 1 TFLOP a step
  const char* flops_name = "TFLOP";
};

std::string percent(double v) { return std::isnan(v) ? "n/a" : fixed(100 * v, 1) + "%"; }

// NaN (a ratio against zero traffic) is an empty CSV field; byte counts
// print as integers, fractions as their shortest exact form.
std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fixed(v, 0);
  return nlohmann::json(v).dump();
}

double ratio(double a, double b) {
  return b > 0 ? a / b : std::numeric_limits<double>::quiet_NaN();
}

std::vector<MemCategory> categories() {
  std::vector<MemCategory> all;
  for (size_t i = 0; i < kMemCategoryCount; ++i) all.push_back(static_cast<MemCategory>(i));
  return all;
}

// The training phase whose peak is the step's peak (the first by name).
std::string peak_phase(const MemorySnapshot& memory) {
  for (Phase p : kPhasesByName)
    if (memory.phase_peak[p] == memory.peak_total) return std::string(phase_name(p));
  return "";
}

// Everything a row says about one strategy against the baseline.
struct Row {
  const StrategySteps& s;
  Summary peak, sent;
  double saving, comm_ratio, comm_ratio_max;
  Row(const StrategySteps& steps, const StrategySteps& ddp)
      : s(steps), peak(steps.peak()), sent(steps.sent()) {
    const Summary ddp_peak = ddp.peak(), ddp_sent = ddp.sent();
    saving = 1 - ratio(peak.max, ddp_peak.max);
    comm_ratio = ratio(sent.mean, ddp_sent.mean);
    comm_ratio_max = ratio(sent.max, ddp_sent.max);
  }
  std::string name() const { return s.request.requested ? s.label : s.label + " (baseline)"; }
  // C as asked for (CSV's active_fraction).
  std::string c_asked() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s.request.active_fraction);
    return buf;
  }
  // The tables' C: as asked for, and the C the plan holds beside it where
  // rounding to whole components per rank moved it.
  std::string c() const {
    if (std::abs(s.held_fraction - s.request.active_fraction) <= 1e-9) return c_asked();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s (held %.4g)", c_asked().c_str(), s.held_fraction);
    return buf;
  }
  // Owners per component: "6", or "5..6" where they differ by one.
  std::string owners() const {
    return s.owners == s.owners_max ? std::to_string(s.owners)
                                    : format(s.owners, "..", s.owners_max);
  }
};

std::vector<Row> rows(const PlanReport& rep) {
  std::vector<Row> out;
  const StrategySteps& ddp = rep.strategies[static_cast<size_t>(rep.job.baseline)];
  for (const StrategySteps& s : rep.strategies) out.emplace_back(s, ddp);
  return out;
}

std::string setup_text(const PlanReport& rep) {
  const TrainConfig& b = rep.job.base;
  const StrategySpec spec = StrategySpec::from_settings(b.parallel, b.model);
  std::string plan = b.parallel.plan + " plans";
  if (b.parallel.plan == "random") plan += " (seed " + std::to_string(b.parallel.plan_seed) + ")";
  if (model_family(b.model) == ModelFamily::swin)
    return format("Per rank: batch ", b.batch, " images (", resolved_data_spec(b),
                  "), grad_accum ", b.grad_accum, ", ", b.dtype, "; ", plan,
                  "; neuron strategies: ", spec.ffn_groups, " MLP and ", spec.head_groups,
                  " head groups per block.");
  if (model_family(b.model) == ModelFamily::resnet)
    return format("Per rank: batch ", b.batch, " images (", resolved_data_spec(b),
                  "), grad_accum ", b.grad_accum, ", ", b.dtype, "; ", plan,
                  "; neuron strategies: ", spec.channel_groups,
                  " inner-channel groups per basic block.");
  return format("Per rank: batch ", b.batch, " x seq ", b.seq, " tokens, grad_accum ",
                b.grad_accum, ", ", b.dtype, "; ", plan, "; neuron strategies: ",
                spec.ffn_groups, " FFN and ", spec.head_groups, " head groups per block.");
}

Units units_for(const StrategySteps& ddp) {
  Units u;
  if (ddp.peak().max < kGiB) {
    u.memory = kMiB;
    u.memory_name = "MiB";
  }
  if (ddp.sent().mean < 100 * kMB) u.comm_digits = 3;
  if (ddp.flops().mean < 1e12) {
    u.flops = 1e9;
    u.flops_name = "GFLOP";
  }
  return u;
}

// The pipeline's shape, for the setup line ("" without one).
std::string pipeline_text(const PlannerJob& job) {
  if (!job.pipelined()) return "";
  const ParallelSettings& p = job.base.parallel;
  return format(" Pipeline: ", p.pipeline_stages, " stages x ", job.replicas(),
                " replicas (stage s on ranks s D .. s D + D - 1, the plan over the D replicas), "
                "schedule ", p.schedule, ", M = ", job.base.grad_accum, " micro-batches, ",
                p.stage_blocks.empty() ? std::string("stages balanced by counted FLOPs")
                                       : "stage blocks " + p.stage_blocks,
                ".");
}

// Pipelined jobs: what each rank's stage holds and sends, per strategy.
std::string pipeline_markdown(const std::vector<Row>& all,
                              const std::function<std::string(double)>& mem,
                              const std::function<std::string(double)>& mb,
                              const std::string& unit) {
  std::string out = format(
      "\nPer rank of the pipeline (", unit, "; sent in MB per step): its stage and blocks, its "
      "peak, the activation category's own peak in the step (2BP's deferred weight gradients "
      "keep their inputs there until W runs), the boundary activations it sends to the next "
      "stage and the boundary gradients to the previous one (M messages each), and what it "
      "sends among the stage's replicas (gradient averaging and the loss all-reduce):\n\n"
      "| strategy | C | rank | stage | replica | blocks | peak | activation peak | to next "
      "stage | to previous stage | among replicas |\n"
      "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n");
  for (const Row& r : all)
    for (const RankStep& s : r.s.ranks)
      out += format("| ", r.name(), " | ", r.c(), " | ", s.rank, " | ", s.stage, " | ",
                    s.pipeline->replica, " | ", s.pipeline->blocks, " | ", mem(s.peak_bytes), " | ",
                    mem(s.activation_peak_bytes), " | ", mb(s.activation_bytes_sent), " | ",
                    mb(s.gradient_bytes_sent), " | ", mb(s.replica_bytes_sent), " |\n");
  return out;
}

// The step-time model's parameters, in words (engine/plan/step_time.h).
std::string time_model_text(const PlannerJob& job) {
  const StepTimeModel& m = job.time_model;
  std::string out = format("Step time estimated at ", fixed(m.flops_per_second / 1e12, 3),
                           " TFLOP/s per rank, collectives at ",
                           fixed(m.link.latency_seconds * 1e6, 2), " us per latency step + bytes / ",
                           fixed(m.link.intra_node_bytes_per_second / 1e9, 3), " GB/s within a node");
  if (m.link.ranks_per_node > 0)
    out += format(" of ", m.link.ranks_per_node, " ranks, ",
                  fixed(m.link.inter_node_bytes_per_second / 1e9, 3), " GB/s across nodes");
  out += m.link.overlap ? "; gathers and gradient reductions overlap compute"
                        : "; no collective overlaps compute";
  if (!job.calibrated_from.empty()) {
    out += " (calibrated from";
    for (const std::string& f : job.calibrated_from) out += " " + f;
    out += ")";
  }
  return out + ".";
}

// Ranks whose peak exceeds their own --rank-memory budget.
std::vector<int> over_budget(const PlannerJob& job, const StrategySteps& s) {
  std::vector<int> out;
  for (const RankStep& r : s.ranks)
    if (r.peak_bytes > job.rank_budgets[static_cast<size_t>(r.rank)]) out.push_back(r.rank);
  return out;
}

template <typename Rows>
std::string budget_markdown(const PlanReport& rep, const Rows& all, const std::string& unit,
                            double unit_bytes) {
  std::string out = format(
      "\nEach rank against its own budget (--rank-memory; SDP plans weighted by the budgets, "
      "owners per component within one):\n\n| strategy | C | owned per rank min..max | "
      "ranks within budget | tightest rank | its peak / budget ", unit,
      " |\n|---|---:|---:|---:|---:|---:|\n");
  for (const auto& r : all) {
    const StrategySteps& s = r.s;
    int tight = 0;
    double worst = -1;
    for (const RankStep& k : s.ranks) {
      const double use = k.peak_bytes / rep.job.rank_budgets[static_cast<size_t>(k.rank)];
      if (use > worst) {
        worst = use;
        tight = k.rank;
      }
    }
    const RankStep& t = s.ranks[static_cast<size_t>(tight)];
    out += format("| ", r.name(), " | ", r.c(), " | ", s.owned_min, "..", s.owned_max, " | ",
                  rep.job.world - static_cast<int>(over_budget(rep.job, s).size()), "/",
                  rep.job.world, " | ", tight, " | ", fixed(t.peak_bytes / unit_bytes, 2), " / ",
                  fixed(rep.job.rank_budgets[static_cast<size_t>(tight)] / unit_bytes, 2),
                  " (", percent(worst), ") |\n");
  }
  return out;
}

template <typename Rows>
std::string step_time_markdown(const PlanReport& rep, const Rows& all) {
  const double ddp = rep.strategies[static_cast<size_t>(rep.job.baseline)].step_time.seconds;
  std::string out = "\n" + time_model_text(rep.job) +
                    " The step waits for its slowest rank (named):\n\n"
                    "| strategy | C | compute s | comm s | exposed comm s | step s | step vs DDP | "
                    "slowest rank |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : all) {
    const StepTimeEstimate& t = r.s.step_time;
    out += format("| ", r.name(), " | ", r.c(), " | ", significant(t.compute_seconds), " | ",
                  significant(t.comm_seconds), " | ", significant(t.exposed_comm_seconds), " | ",
                  significant(t.seconds), " | ", fixed(ratio(t.seconds, ddp), 3), " | ",
                  r.s.step_time_rank, " |\n");
  }
  return out;
}

std::string markdown(const PlanReport& rep) {
  const TrainConfig& b = rep.job.base;
  const auto model = make_model(b.model);
  const std::vector<Row> all = rows(rep);
  const Units u = units_for(rep.strategies[static_cast<size_t>(rep.job.baseline)]);
  auto mem = [&](double bytes) { return fixed(bytes / u.memory, 2); };
  auto mb = [&](double bytes) { return fixed(bytes / kMB, u.comm_digits); };
  auto mib = [&](double bytes) { return fixed(bytes / kMiB, u.comm_digits); };
  const std::string unit = u.memory_name;

  std::string out = format("## sdp-plan: ", model->name(), " (",
                           fixed(static_cast<double>(model->parameter_count()) / 1e6, 1),
                           "M parameters) on ", rep.job.world, " ranks\n\n");
  out += std::string("One training step of every rank on the meta device: the bytes a ") +
         (DeviceTarget::parse(rep.job.base.device).cpu_kernels() ? "CPU run would hold (64-byte blocks)"
                                            : "CUDA device would hold (512-byte blocks)") +
         " and the bytes each rank sends by the ring formulas of docs/ARCHITECTURE.md "
         "\"Measurements\". " + setup_text(rep) + pipeline_text(rep.job) + "\n";
  out += format("Memory in ", unit, " (2^", unit == "GiB" ? 30 : 20,
                " bytes). Communication per rank per step in MB (10^6 bytes), MiB (2^20 bytes) "
                "in brackets. Savings and ratios are against DDP (C = 1).\n\n");

  out += format("| strategy | C | owners/N | spectral gap | peak max ", unit, " | peak mean ", unit,
                " | peak min ", unit,
                " | max peak saving vs DDP | sent mean MB [MiB] | sent max MB [MiB] | sent mean "
                "vs DDP |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : all)
    out += format("| ", r.name(), " | ", r.c(), " | ", r.owners(), "/", rep.job.replicas(), " | ",
                  fixed(r.s.spectral_gap, 3), " | ", mem(r.peak.max), " | ", mem(r.peak.mean),
                  " | ", mem(r.peak.min), " | ", percent(r.saving), " | ", mb(r.sent.mean), " [",
                  mib(r.sent.mean), "] | ", mb(r.sent.max), " [", mib(r.sent.max), "] | ",
                  fixed(r.comm_ratio, 3), " |\n");

  for (const Row& r : all)
    if (!r.s.coverage_warning.empty()) out += "\n" + r.name() + ": " + r.s.coverage_warning;

  if (!rep.job.rank_budgets.empty()) out += budget_markdown(rep, all, unit, u.memory);

  const std::vector<MemCategory> cats = categories();
  out += format("\nThe highest peak by category (", unit,
                " at the peak of the first rank with the highest peak, and the phase it falls "
                "in):\n\n| strategy | C | rank |");
  for (MemCategory c : cats) out += " " + std::string(category_name(c)) + " |";
  out += " total | phase |\n|---|---:|---:|";
  for (size_t i = 0; i < cats.size() + 1; ++i) out += "---:|";
  out += "---|\n";
  for (const Row& r : all) {
    const RankStep& top = r.s.ranks[static_cast<size_t>(r.peak.argmax)];
    out += format("| ", r.name(), " | ", r.c(), " | ", top.rank, " |");
    for (MemCategory c : cats)
      out += " " + mem(static_cast<double>(top.memory->at_peak[c])) + " |";
    out += " " + mem(top.peak_bytes) + " | " + peak_phase(*top.memory) + " |\n";
  }

  const std::string fl = u.flops_name;
  out += format("\nCompute per rank per step (", fl, " = 10^", u.flops == 1e12 ? 12 : 9,
                " FLOPs of matmuls and attention, recomputation included; recompute = the "
                "step's FLOPs minus those of the same composition without recomputation):\n\n"
                "| strategy | C | shard | recompute policy | FLOPs/rank mean (", fl,
                ") | FLOPs/rank max (", fl, ") | recompute mean (", fl,
                ") | recompute / step |\n|---|---:|---|---|---:|---:|---:|---:|\n");
  for (const Row& r : all) {
    const Summary flops = r.s.flops(), recompute = r.s.recompute_flops();
    out += format("| ", r.name(), " | ", r.c(), " | ", r.s.shard, " | ",
                  r.s.activation_checkpointing, " | ", fixed(flops.mean / u.flops, 3), " | ",
                  fixed(flops.max / u.flops, 3), " | ", fixed(recompute.mean / u.flops, 3),
                  " | ", percent(ratio(recompute.mean, flops.mean)), " |\n");
  }

  out += step_time_markdown(rep, all);

  if (rep.job.pipelined()) out += pipeline_markdown(all, mem, mb, unit);

  if (rep.job.per_rank) {
    out += format("\nPer rank: peak memory ", unit, " / sent MB per step.\n\n| rank |");
    for (const Row& r : all) out += " " + r.s.label + " " + r.c() + " |";
    out += "\n|---:|";
    for (size_t i = 0; i < all.size(); ++i) out += "---:|";
    out += "\n";
    for (int rank = 0; rank < rep.job.world; ++rank) {
      out += format("| ", rank, " |");
      for (const Row& r : all) {
        const RankStep& s = r.s.ranks[static_cast<size_t>(rank)];
        out += " " + mem(s.peak_bytes) + " / " + mb(s.sent_bytes) + " |";
      }
      out += "\n";
    }
  }
  size_t steps = 0;
  for (const StrategySteps& s : rep.strategies) steps += static_cast<size_t>(s.meta_steps());
  size_t measured = 0;
  for (const StrategySteps& s : rep.strategies) measured += static_cast<size_t>(s.measured_ranks());
  const size_t rank_steps = rep.strategies.size() * static_cast<size_t>(rep.job.world);
  out += format("\n", steps, " meta steps (", measured, " measured ranks of ", rank_steps, " = ",
                rep.strategies.size(), " strategies x ", rep.job.world,
                " ranks, one per class of ranks holding the same plan row at the same stage",
                rep.job.every_rank ? " (--every-rank: all of them)" : "",
                ", and a twin without recomputation for each measured rank that recomputes) in ",
                fixed(rep.seconds, 2), " s.\n");
  return out + paper_markdown(rep);  // empty without --paper
}

// The pipeline columns of a CSV row.
struct PipelineFigures {
  double activation_peak = 0, activations = 0, gradients = 0, replicas = 0;
};

std::string csv(const PlanReport& rep) {
  const std::vector<MemCategory> cats = categories();
  std::string out =
      "strategy,active_fraction,owners,world,components,spectral_gap,requested,rank,"
      "peak_max_bytes,peak_mean_bytes,peak_min_bytes,peak_rank";
  for (MemCategory c : cats) out += "," + std::string(category_name(c)) + "_bytes";
  out += ",saving_vs_ddp,sent_mean_bytes,sent_max_bytes,sent_min_bytes,comm_ratio_vs_ddp,"
         "gathered_peak_bytes,flops_mean,flops_max,recompute_flops_mean,recompute_flops_max,"
         "shard,activation_checkpointing,label,stage,activation_peak_bytes,activation_bytes_sent,"
         "gradient_bytes_sent,replica_bytes_sent,step_seconds,compute_seconds,"
         "exposed_comm_seconds\n";
  const StrategySteps& ddp = rep.strategies[static_cast<size_t>(rep.job.baseline)];
  const Summary ddp_peak = ddp.peak(), ddp_sent = ddp.sent();
  // A rank row is the summary of that one rank, against the same baseline.
  auto line = [&](const Row& r, const std::string& rank, const Summary& peak, const Summary& sent,
                  const Summary& gathered, const Summary& flops, const Summary& recompute,
                  const RankStep& top, const std::string& stage, const PipelineFigures& pipe) {
    out += format(r.s.request.strategy, ",", r.c_asked(), ",", r.s.owners, ",", rep.job.world, ",",
                  r.s.components, ",", csv_number(r.s.spectral_gap), ",",
                  r.s.request.requested ? "true" : "false", ",", rank, ",", csv_number(peak.max),
                  ",", csv_number(peak.mean), ",", csv_number(peak.min), ",", top.rank);
    for (MemCategory c : cats)
      out += "," + csv_number(static_cast<double>(top.memory->at_peak[c]));
    out += format(",", csv_number(1 - ratio(peak.max, ddp_peak.max)), ",", csv_number(sent.mean),
                  ",", csv_number(sent.max), ",", csv_number(sent.min), ",",
                  csv_number(ratio(sent.mean, ddp_sent.mean)), ",", csv_number(gathered.max),
                  ",", csv_number(flops.mean), ",", csv_number(flops.max), ",",
                  csv_number(recompute.mean), ",", csv_number(recompute.max), ",", r.s.shard,
                  ",", r.s.activation_checkpointing, ",", r.s.label, ",", stage, ",",
                  csv_number(pipe.activation_peak), ",", csv_number(pipe.activations), ",",
                  csv_number(pipe.gradients), ",", csv_number(pipe.replicas), ",",
                  csv_number(r.s.step_time.seconds), ",", csv_number(r.s.step_time.compute_seconds),
                  ",", csv_number(r.s.step_time.exposed_comm_seconds), "\n");
  };
  for (const Row& r : rows(rep)) {
    // The strategy's row: the largest figure of any rank (stage empty).
    PipelineFigures most;
    for (const RankStep& s : r.s.ranks) {
      most.activation_peak = std::max(most.activation_peak, s.activation_peak_bytes);
      most.activations = std::max(most.activations, s.activation_bytes_sent);
      most.gradients = std::max(most.gradients, s.gradient_bytes_sent);
      most.replicas = std::max(most.replicas, s.replica_bytes_sent);
    }
    line(r, "all", r.peak, r.sent, r.s.gathered_peak(), r.s.flops(), r.s.recompute_flops(),
         r.s.ranks[static_cast<size_t>(r.peak.argmax)], "", most);
    if (!rep.job.per_rank) continue;
    for (const RankStep& s : r.s.ranks) {
      auto one = [&](double v) { return Summary{v, v, v, s.rank}; };
      line(r, std::to_string(s.rank), one(s.peak_bytes), one(s.sent_bytes),
           one(s.gathered_peak_bytes), one(s.flops), one(s.recompute_flops), s,
           s.stage < 0 ? std::string() : std::to_string(s.stage),
           {s.activation_peak_bytes, s.activation_bytes_sent, s.gradient_bytes_sent,
            s.replica_bytes_sent});
    }
  }
  return out;
}

nlohmann::json summary_json(const Summary& s, const std::vector<double>& by_rank) {
  return {{"min", s.min}, {"mean", s.mean}, {"max", s.max}, {"max_rank", s.argmax},
          {"by_rank", by_rank}};
}

std::string json(const PlanReport& rep) {
  const TrainConfig& b = rep.job.base;
  const StrategySpec spec = StrategySpec::from_settings(b.parallel, b.model);
  const auto model = make_model(b.model);
  nlohmann::json strategies = nlohmann::json::array();
  for (const Row& r : rows(rep)) {
    std::vector<double> peaks, sents, gathered, flops, recompute;
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankStep& s : r.s.ranks) {
      peaks.push_back(s.peak_bytes);
      sents.push_back(s.sent_bytes);
      gathered.push_back(s.gathered_peak_bytes);
      flops.push_back(s.flops);
      recompute.push_back(s.recompute_flops);
      ranks.push_back({{"rank", s.rank},
                       {"memory", s.memory->to_json()},
                       {"comm", s.comm_json()},
                       {"flops", s.flops},
                       {"recompute_flops", s.recompute_flops},
                       {"seconds", s.seconds},
                       {"measured_as", s.measured_as},
                       {"stage", s.stage < 0 ? nlohmann::json() : nlohmann::json(s.stage)},
                       {"activation_peak_bytes", s.activation_peak_bytes},
                       {"activation_bytes_sent", s.activation_bytes_sent},
                       {"gradient_bytes_sent", s.gradient_bytes_sent},
                       {"replica_bytes_sent", s.replica_bytes_sent},
                       {"pipeline", s.pipeline ? s.pipeline->to_json() : nlohmann::json()}});
    }
    const RankStep& top = r.s.ranks[static_cast<size_t>(r.peak.argmax)];
    const nlohmann::json top_memory = top.memory->to_json();
    strategies.push_back(
        {{"strategy", r.s.request.strategy},
         {"label", r.s.label},
         {"shard", r.s.shard},
         {"activation_checkpointing", r.s.activation_checkpointing},
         {"description", r.s.description},
         {"requested", r.s.request.requested},
         {"active_fraction", r.s.request.active_fraction},
         {"owners_per_component", r.s.owners},
         {"owners_per_component_max", r.s.owners_max},
         {"effective_active_fraction", r.s.held_fraction},
         {"components", r.s.components},
         {"granularity", r.s.granularity},
         {"masking", r.s.masking},
         {"spectral_gap", r.s.spectral_gap},
         {"peak_bytes", summary_json(r.peak, peaks)},
         {"at_peak", top_memory["peak"]["at_peak"]},
         {"phase_peak", top_memory["phase_peak"]},
         {"saving_vs_ddp", r.saving},
         {"sent_bytes", summary_json(r.sent, sents)},
         {"gathered_peak_bytes", summary_json(r.s.gathered_peak(), gathered)},
         {"flops", summary_json(r.s.flops(), flops)},
         {"recompute_flops", summary_json(r.s.recompute_flops(), recompute)},
         {"comm_ratio_vs_ddp", r.comm_ratio},
         {"comm_ratio_max_vs_ddp", r.comm_ratio_max},
         {"owned_per_rank", {{"min", r.s.owned_min}, {"max", r.s.owned_max}}},
         {"ranks_over_budget", rep.job.rank_budgets.empty()
                                   ? nlohmann::json()
                                   : nlohmann::json(over_budget(rep.job, r.s))},
         {"step_time", [&] {
            nlohmann::json t = r.s.step_time.to_json();
            t["rank"] = r.s.step_time_rank;
            return t;
          }()},
         {"ranks", ranks}});
  }
  nlohmann::json pipeline;  // null without one
  if (rep.job.pipelined())
    pipeline = {{"stages", b.parallel.pipeline_stages},
                {"replicas", rep.job.replicas()},
                {"schedule", b.parallel.schedule},
                {"micro_batches", b.grad_accum},
                {"stage_blocks", b.parallel.stage_blocks}};
  const nlohmann::json out = {{"tool", "sdp-plan"},
                              {"model", model->name()},
                              {"parameters", model->parameter_count()},
                              {"model_config", model->config_json()},
                              {"world", rep.job.world},
                              {"batch", b.batch},
                              {"seq", b.seq},
                              {"grad_accum", b.grad_accum},
                              {"dtype", b.dtype},
                              {"plan", b.parallel.plan},
                              {"plan_seed", b.parallel.plan_seed},
                              {"ffn_groups", spec.ffn_groups},
                              {"head_groups", spec.head_groups},
                              {"channel_groups", spec.channel_groups},
                              {"data", resolved_data_spec(b)},
                              {"units", "bytes"},
                              {"baseline", rep.job.baseline},
                              {"seconds", rep.seconds},
                              {"pipeline", pipeline},
                              {"rank_memory", rep.job.rank_budgets.empty()
                                                  ? nlohmann::json()
                                                  : nlohmann::json(rep.job.rank_budgets)},
                              {"step_time_model", [&] {
                                 nlohmann::json m = rep.job.time_model.to_json();
                                 m["calibrated_from"] = rep.job.calibrated_from;
                                 return m;
                               }()},
                              {"strategies", strategies},
                              {"paper", paper_json(rep)}};  // null without --paper
  return out.dump(2) + "\n";
}

}  // namespace

std::string render(const PlanReport& rep) {
  switch (rep.job.format) {
    case OutputFormat::markdown: return markdown(rep);
    case OutputFormat::csv: return csv(rep);
    case OutputFormat::json: return json(rep);
  }
  return "";
}

}  // namespace sdp::planner
