#include "apps/sdp-plan/plan_options.h"

#include <cmath>
#include <cstdio>

#include "apps/integer_option.h"
#include "apps/sdp-plan/paper_presets.h"
#include "apps/training_options.h"

#include "engine/checkpoint/byte_size.h"
#include "engine/checkpoint/output_path.h"
#include "engine/core/device_target.h"
#include "engine/core/error.h"
#include "engine/parallel/composition.h"
#include "engine/parallel/strategy.h"
#include "engine/parallel/strategy_table.h"
#include "engine/plan/subnet_plan.h"
#include "engine/train/trainer.h"
#include "models/llama/llama_config.h"
#include "models/registry.h"

namespace sdp::planner {

namespace {

// Each rank is one meta step; far beyond this the run takes hours, and the
// world must fit an int for the communicator anyway.
constexpr int64_t kMaxWorld = config_limits::kWorld;

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

std::vector<StrategyRequest> parse_strategies(const std::string& list) {
  std::vector<StrategyRequest> out;
  size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    const std::string item =
        trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty())
      fail("--strategies '", list, "' has an empty item (expected a comma list of ",
           kCompositionForms, ", e.g. ", kDefaultStrategies, ")");
    out.push_back(parse_strategy_item(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

OutputFormat parse_format(const std::string& f) {
  if (f == "markdown") return OutputFormat::markdown;
  if (f == "csv") return OutputFormat::csv;
  if (f == "json") return OutputFormat::json;
  fail("--format = '", f, "' is invalid (valid: markdown, csv, json)");
}

}  // namespace

StrategyRequest parse_strategy_item(const std::string& item) {
  Composition c;
  try {
    c = parse_composition(item);
  } catch (const Error& e) {
    fail("--strategies item '", item, "': ", e.what());
  }
  StrategyRequest s;
  s.text = item;
  s.strategy = c.strategy;
  const bool subnetworks = find_strategy(c.strategy)->takes_fraction;
  s.active_fraction = c.active_fraction.value_or(subnetworks ? kDefaultActiveFraction : 1.0);
  s.shard = c.shard;
  s.recompute = c.recompute;
  return s;
}

void add_options(CLI::App& app, PlanOptions& o) {
  TrainConfig& c = o.base;
  // First: its callback fills the flags below, whose own callbacks (given
  // beside --paper) run after it and override the preset.
  add_paper_option(app, o);
  app::add_training_option(app, c, "model")->required();
  app::add_model_field_flags(app, o.model_fields);
  app.add_option("--world", o.world, "Number of ranks N of the job to plan")
      ->check(app::integer_in(int64_t{1}, kMaxWorld))
      ->required();
  auto* strategies = app.add_option("--strategies", o.strategies,
                 format("Comma list of compositions ", kCompositionForms, ": name in ",
                        strategy_names(), ", C in (0, 1] (SDP without C: 0.5; ddp, fsdp: 1; each rank "
                        "holds round(C K) of the K components); "
                        "+fsdp or +zero3 = full sharding, +zero2 = gradients, +zero1 = optimizer "
                        "state; +ac = every block checkpointed, +ac:K = every K-th. E.g. fsdp+ac, "
                        "b-sdp:0.6875+fsdp+ac, n-sdp:0.5+zero2, ddp+zero1. Plain DDP is added as "
                        "the baseline when absent; with --pipeline-stages the default has no "
                        "bb-sdp, nb-sdp, which a pipeline refuses"))
      ->capture_default_str();
  strategies->each([&o](const std::string&) { o.strategies_given = true; });
  // The config fields this planner takes, as sdp-train takes them.
  for (const char* field : {"batch", "seq", "grad_accum", "pipeline_stages", "schedule"})
    app::add_training_option(app, c, field)->capture_default_str();
  app::add_training_option(app, c, "stage_blocks");
  app::add_training_option(app, c, "deferred_weight_grads")->capture_default_str();
  for (const char* field :
       {"dtype", "plan", "plan_seed", "ffn_groups", "head_groups", "channel_groups", "data"})
    app::add_training_option(app, c, field)->capture_default_str();
  app.add_option("--format", o.format, "markdown, csv or json")->capture_default_str();
  app.add_option("--grad-reduce-dtype", c.grad_reduce_dtype,
                 "Dtype the gradients are all-reduced in: f32, or bf16 (half the bytes; not "
                 "with sharded compositions, which reduce-scatter f32)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app.add_flag("--per-rank", o.per_rank,
               "Add each rank's peak memory and bytes sent (a rank x strategy table; csv: one "
               "row per rank)");
  app.add_flag("--every-rank", o.every_rank,
               "Run every rank's meta step, not one per class of ranks that hold the same plan "
               "row at the same pipeline stage (those take the same step; this checks it, and "
               "is slow on large worlds)");
  app.add_option("--output", o.output, "Write the report to FILE instead of stdout");

  // The step-time model (engine/plan/step_time.h).
  app.add_option("--flops-per-second", o.flops_per_second,
                 "Step-time model: sustained FLOP rate of one rank (default: an H100/H200-class "
                 "bf16 rate)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--link-latency", o.link_latency,
                 "Step-time model: seconds per latency step of a collective (alpha)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--intra-node-bandwidth", o.intra_node_bandwidth,
                 "Step-time model: bandwidth between ranks of one node, e.g. 400GB/s, 900GB/s")
      ->capture_default_str();
  app.add_option("--inter-node-bandwidth", o.inter_node_bandwidth,
                 "Step-time model: bandwidth between nodes, e.g. 100Gb/s, 400Gb/s, 50GB/s")
      ->capture_default_str();
  app.add_option("--ranks-per-node", o.ranks_per_node,
                 "Step-time model: ranks per node (a group within one node takes the intra-node "
                 "bandwidth; 0 = all on one node)")
      ->check(app::integer_in(int64_t{0}, kMaxWorld))
      ->capture_default_str();
  app.add_option("--overlap", o.overlap,
                 "Step-time model: on = gathers and gradient reductions hide behind compute (the "
                 "CUDA engine), off = every collective adds (host MPI); auto = on, or off with "
                 "--calibrate")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  app.add_option("--calibrate", o.calibrate,
                 "Metrics JSONL of real sdp-train runs (repeatable): set the FLOP rate and the "
                 "link's latency and bandwidth (both nodes' bandwidths) from their steps");

  app.add_option("--fit", o.fit,
                 "Search the configurations that fit this per-rank memory budget (e.g. 24GiB, "
                 "80GB): strategy x C x shard level x recomputation x micro-batch x pipeline "
                 "stages, over --batch x --grad-accum examples per rank per step");
  app.add_option("--tokens-per-rank", o.tokens_per_rank,
                 "--fit on a LLaMA: tokens per rank per step (a multiple of --seq), instead of "
                 "--batch x --grad-accum")
      ->check(app::integer_in(int64_t{1}, int64_t{1} << 40));
  app.add_option("--min-active-fraction", o.min_active_fraction,
                 "--fit: the smallest C an SDP configuration may have")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--prefer-owners", o.prefer_owners,
                 "--fit: rank first the configurations where every component is averaged over "
                 "at least this many ranks (1 owner: no averaging at all)")
      ->check(app::integer_in(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--prefer-active-fraction", o.prefer_active_fraction,
                 "--fit: rank first the configurations with at least this C (and "
                 "--prefer-owners); the rest follow")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--device", o.device,
                 "The device planned for: cuda (meta steps count CUDA's 512-byte blocks and "
                 "workspaces) or cpu (the CPU allocator's); --fit writes it in the config")
      ->check(CLI::IsMember({"cuda", "cpu"}))
      ->capture_default_str();
  app.add_option("--write-config", o.write_config,
                 "--fit: write the chosen configuration as an sdp-train --config JSON file");
  app.add_option("--rank-memory", o.rank_memory,
                 "Ranks of unequal memory: one budget per rank (e.g. 80GiB,80GiB,40GiB,40GiB, "
                 "or per node 80GiBx8,40GiBx8). SDP plans become weighted: the m N = round(C K) N "
                 "ownerships are shared by budget (owners per component within one); the "
                 "report sets each rank's peak against its own budget");
  app.add_option("--write-plan", o.write_plan,
                 "Write the ownership plan of the one SDP item of --strategies as JSON ({\"matrix\": "
                 "[\"0101...\", ...]}, one row per rank), which sdp-train --plan file:PATH trains");
  app.add_option("--choose", o.choose, "--fit: the row of the ranked list to write (1 = first)")
      ->check(app::integer_in(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
}

double parse_bandwidth(const std::string& text, const std::string& what) {
  const auto bad = [&]() -> double {
    fail(what, " = '", text, "' is invalid (valid: a positive number of bytes per second, "
         "or with a unit: B/s, KB/s, MB/s, GB/s, TB/s for bytes, b/s, Kb/s, Mb/s, Gb/s, Tb/s "
         "for bits; e.g. 400Gb/s, 50GB/s)");
  };
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return bad();
  }
  std::string unit = trim(text.substr(used));
  double scale = 1;
  if (!unit.empty()) {
    if (unit.size() < 3 || unit.substr(unit.size() - 2) != "/s") return bad();
    unit = unit.substr(0, unit.size() - 2);
    const char kind = unit.back();  // B bytes, b bits
    if (kind != 'B' && kind != 'b') return bad();
    unit.pop_back();
    static const std::pair<const char*, double> prefixes[] = {
        {"", 1}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}};
    bool known = false;
    for (const auto& [prefix, factor] : prefixes)
      if (unit == prefix) {
        scale = factor;
        known = true;
      }
    if (!known) return bad();
    if (kind == 'b') scale /= 8;
  }
  if (!(value > 0) || !std::isfinite(value * scale)) return bad();
  return value * scale;
}

TrainConfig rank_config(const PlannerJob& job, const StrategyRequest& s, int rank) {
  TrainConfig c = job.base;
  ParallelSettings& p = c.parallel;
  p.strategy = s.strategy;
  p.active_fraction = s.active_fraction;
  p.shard = s.shard ? std::string(shard_level_name(*s.shard)) : std::string();
  p.activation_checkpointing = s.recompute.name();
  // A plan file is the SDP items' ownership: DDP and FSDP (C = 1) keep
  // every rank owning everything, so the baseline stays DDP (resolve_job
  // checks the file for them all the same).
  if (!find_strategy(s.strategy)->takes_fraction && p.plan.rfind("file:", 0) == 0)
    p.plan = "cyclic";
  c.emulate_world = job.world;
  c.emulate_rank = rank;
  return c;
}

PlannerJob resolve_job(const PlanOptions& o) {
  if (o.world < 1 || o.world > kMaxWorld)
    fail("--world = ", o.world, " is invalid (valid: 1 to ", kMaxWorld, ")");
  const int64_t P = o.base.parallel.pipeline_stages;
  if (P > 1 && o.world % P != 0)
    fail("--world = ", o.world, " is not a multiple of --pipeline-stages = ", P,
         " (the world is P stages x D replicas; valid: ", P, ", ", 2 * P, ", ", 3 * P, ", ...)");
  PlannerJob job;
  job.world = static_cast<int>(o.world);
  job.format = parse_format(o.format);
  job.per_rank = o.per_rank;
  job.every_rank = o.every_rank;
  job.output = o.output;

  StepTimeModel& m = job.time_model;
  if (!std::isfinite(o.flops_per_second) || !std::isfinite(o.link_latency))
    fail("--flops-per-second = ", o.flops_per_second, ", --link-latency = ", o.link_latency,
         " (valid: finite numbers)");
  m.flops_per_second = o.flops_per_second;
  m.link.latency_seconds = o.link_latency;
  m.link.intra_node_bytes_per_second =
      parse_bandwidth(o.intra_node_bandwidth, "--intra-node-bandwidth");
  m.link.inter_node_bytes_per_second =
      parse_bandwidth(o.inter_node_bandwidth, "--inter-node-bandwidth");
  m.link.ranks_per_node = static_cast<int>(o.ranks_per_node);
  m.link.overlap = o.overlap != "off";
  if (!o.fit.empty()) {
    job.fit_budget_bytes = static_cast<double>(checkpoint::parse_byte_size(o.fit, "--fit"));
    if (o.strategies_given)
      fail("--fit searches every strategy, shard level and recomputation itself; leave out "
           "--strategies (or leave out --fit to compare a list)");
    if (o.base.parallel.pipeline_stages > 1)
      fail("--fit searches the pipeline stages itself; leave out --pipeline-stages");
    const int64_t examples =
        o.tokens_per_rank > 0 ? o.tokens_per_rank / o.base.seq : o.base.batch * o.base.grad_accum;
    if (o.tokens_per_rank > 0) {
      if (model_family(o.base.model) != ModelFamily::llama)
        fail("--tokens-per-rank needs a LLaMA model (", o.base.model, " takes --batch)");
      if (o.tokens_per_rank % o.base.seq != 0)
        fail("--tokens-per-rank = ", o.tokens_per_rank, " is not a multiple of --seq = ",
             o.base.seq, " (valid: ", o.base.seq, ", ", 2 * o.base.seq, ", ...)");
    }
    if (examples < 1 || examples > config_limits::kBatch)
      fail("--fit: ", examples, " examples per rank per step is invalid (valid: 1 to ",
           config_limits::kBatch, ")");
    job.fit_examples_per_rank = static_cast<int>(examples);
    job.fit_min_active_fraction = o.min_active_fraction;
    job.fit_prefer_owners = o.prefer_owners;
    job.fit_prefer_active_fraction = o.prefer_active_fraction;
    job.fit_device = o.device;
    job.write_config = o.write_config;
    job.choose = static_cast<int>(o.choose);
  } else if (!o.write_config.empty() || o.tokens_per_rank > 0) {
    fail(o.write_config.empty() ? "--tokens-per-rank" : "--write-config",
         " needs --fit BUDGET (the search whose result it belongs to)");
  }
  if (!o.paper.empty()) {
    if (!o.fit.empty())
      fail("--paper runs the paper's strategies; leave out --fit (or --paper to search a "
           "budget)");
    job.paper = o.paper;
    job.paper_overrides = o.paper_overrides;
  }
  if (!o.rank_memory.empty()) {
    if (!o.fit.empty())
      fail("--rank-memory with --fit is not supported: the search fits one budget for every "
           "rank; plan uneven ranks with --rank-memory and --strategies");
    if (o.base.parallel.pipeline_stages > 1)
      fail("--rank-memory with --pipeline-stages is not supported: a pipeline's plan is over "
           "one stage's replicas, not the ranks the budgets name");
    if (o.base.parallel.plan != "cyclic")
      fail("--rank-memory builds a weighted plan; leave out --plan '", o.base.parallel.plan, "'");
    try {
      job.rank_budgets = parse_rank_weights(o.rank_memory, o.world);
    } catch (const Error& e) {
      fail("--rank-memory: ", e.what());
    }
    if (static_cast<int64_t>(job.rank_budgets.size()) != o.world)
      fail("--rank-memory names ", job.rank_budgets.size(), " budgets for --world = ", o.world,
           " ranks (valid: one per rank; VALUExCOUNT repeats one)");
  }
  job.write_plan = o.write_plan;
  if (!o.calibrate.empty()) {
    std::vector<MeasuredRun> runs;
    for (const std::string& path : o.calibrate) {
      runs.push_back(read_metrics(path));
      if (!runs.back().skipped_cut_line.empty())
        std::fprintf(stderr, "sdp-plan: warning: %s\n", runs.back().skipped_cut_line.c_str());
    }
    m = calibrate(runs, m);
    m.link.overlap = o.overlap == "on";
    job.calibrated_from = o.calibrate;
  }

  const bool language_model = model_family(o.base.model) == ModelFamily::llama;
  // One training step on the meta device and nothing else: no evaluation,
  // no files; the strategy fields are set per item.
  TrainConfig& b = job.base;
  b = o.base;
  b.device = DeviceTarget::dry_run_of(o.device == "cpu" ? Device::cpu : Device::cuda).name();
  b.steps = 1;
  b.eval_every = 0;
  b.progress = false;
  b.metrics.clear();
  b.save_dir.clear();
  b.save_every = 0;
  b.resume.clear();
  if (!job.rank_budgets.empty()) b.parallel.plan = "weighted:" + o.rank_memory;
  b.parallel.strategy = "ddp";
  b.parallel.active_fraction = 1.0;
  b.parallel.shard.clear();
  b.parallel.activation_checkpointing = "none";
  b.emulate_world = job.world;
  b.emulate_rank = 0;
  b.validate();  // the shared fields, with their own names
  if (language_model) {
    const llama::LlamaConfig model = llama_config(o.base.model);
    if (b.seq > model.max_seq)
      fail("config: seq = ", b.seq, " exceeds model ", model.name, "'s max_seq ", model.max_seq);
  }

  const bool pipelined = b.parallel.pipelined();
  std::vector<StrategyRequest> requested = parse_strategies(o.strategies);
  job.baseline = -1;
  for (size_t i = 0; i < requested.size(); ++i)
    if (requested[i].plain_ddp()) {
      job.baseline = 0;
      // Listed first, so that the baseline heads every table.
      job.strategies.push_back(requested[i]);
      requested.erase(requested.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  if (job.baseline < 0) {
    job.baseline = 0;
    StrategyRequest ddp;
    ddp.text = ddp.strategy = "ddp";
    ddp.requested = false;
    job.strategies.push_back(ddp);
  }
  job.strategies.insert(job.strategies.end(), requested.begin(), requested.end());

  if (pipelined) {
    // The pipeline's own flags (stage blocks, schedule) first, under their
    // own names: DDP's rank 0 reaches every check of them.
    StrategyRequest ddp;
    ddp.text = ddp.strategy = "ddp";
    const TrainConfig c = rank_config(job, ddp, 0);
    c.validate();
    Trainer check(c);
  }
  // A plan file is read by the SDP items (rank_config); with none of them,
  // the DDP row checks it as a plan over the model's blocks, so that a file
  // no job could train (a block without an owner, named) is refused
  // whatever rows read it (--fit tries it on each candidate instead).
  const bool file_plan = b.parallel.plan.rfind("file:", 0) == 0;
  bool file_read = false;
  for (const StrategyRequest& s : job.strategies)
    file_read = file_read || find_strategy(s.strategy)->takes_fraction;
  if (file_plan && !file_read && job.fit_budget_bytes <= 0) {
    try {
      // b.parallel: DDP (block granularity) with the file, as given.
      SubnetLayout::build(o.base.model, StrategySpec::from_settings(b.parallel, o.base.model),
                          job.replicas(), 0);
    } catch (const Error& e) {
      fail("--plan ", b.parallel.plan, ": ", e.what());
    }
  }
  for (const StrategyRequest& s : job.strategies) {
    try {
      const TrainConfig c = rank_config(job, s, 0);
      c.validate();
      if (pipelined) {
        // Rank 0's trainer refuses what a pipelined job can: stage blocks
        // that do not tile the model, a schedule name or file that does not
        // fit, a plan over the replicas with no owners. On the meta device
        // building it costs no memory and runs no step.
        Trainer check(c);
        continue;
      }
      // The plan and the storage groups (what the first trainer would refuse).
      SubnetLayout::build(o.base.model, StrategySpec::from_settings(c.parallel, o.base.model),
                          job.world, 0);
    } catch (const Error& e) {
      fail("--strategies item '", s.text, "': ", e.what());
    }
  }
  if (!job.write_plan.empty()) {
    int sdp_items = 0;
    for (const StrategyRequest& s : job.strategies)
      sdp_items += find_strategy(s.strategy)->takes_fraction;
    if (sdp_items != 1 || job.fit_budget_bytes > 0)
      fail("--write-plan writes the plan of one SDP item; --strategies has ", sdp_items,
           job.fit_budget_bytes > 0 ? " and --fit searches many" : "",
           " (valid: exactly one of b-sdp, n-sdp, bb-sdp, nb-sdp, e.g. --strategies b-sdp:0.5)");
  }
  // Every file written at the end can be written: checked before the
  // meta steps, not after them. The report is a plain write into an
  // existing directory; the JSON files are written atomically, their
  // directories made on the way.
  checkpoint::check_output_paths(
      {{"--output", "report file", job.output, false, false},
       {"--write-config", "config file", job.write_config},
       {"--write-plan", "plan file", job.write_plan}});
  return job;
}

}  // namespace sdp::planner
