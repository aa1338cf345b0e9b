#include "apps/sdp-plan/plan_options.h"

#include <charconv>
#include <limits>

#include "apps/integer_option.h"

#include "engine/core/error.h"
#include "engine/parallel/strategy.h"
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

StrategyRequest parse_item(const std::string& item) {
  StrategyRequest s;
  s.text = item;
  const auto colon = item.find(':');
  s.strategy = item.substr(0, colon);
  if (colon == std::string::npos) {
    s.active_fraction = s.strategy == "ddp" ? 1.0 : kDefaultActiveFraction;
    return s;
  }
  const std::string c = item.substr(colon + 1);
  const char* end = c.data() + c.size();
  const auto [ptr, ec] = std::from_chars(c.data(), end, s.active_fraction);
  if (c.empty() || ec != std::errc() || ptr != end)
    fail("--strategies item '", item, "': C = '", c,
         "' is not a number (expected name[:C] with C in (0, 1], e.g. b-sdp:0.5)");
  return s;
}

std::vector<StrategyRequest> parse_strategies(const std::string& list) {
  std::vector<StrategyRequest> out;
  size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    const std::string item =
        trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty())
      fail("--strategies '", list, "' has an empty item (expected a comma list of name[:C], e.g. ",
           kDefaultStrategies, ")");
    out.push_back(parse_item(item));
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

void add_options(CLI::App& app, PlanOptions& o) {
  TrainConfig& c = o.base;
  namespace L = config_limits;
  app.add_option("--model", c.model,
                 "Named LLaMA config: tiny, mini, small, small-32k, llama-134m, llama-500m, "
                 "llama-1b")
      ->required();
  app.add_option("--world", o.world, "Number of ranks N of the job to plan")
      ->check(app::integer_in(int64_t{1}, kMaxWorld))
      ->required();
  app.add_option("--strategies", o.strategies,
                 "Comma list of name[:C], name in ddp, b-sdp, n-sdp, bb-sdp, nb-sdp and C in "
                 "(0, 1] (SDP without C: 0.5; ddp: 1). DDP is added as the baseline when absent")
      ->capture_default_str();
  app.add_option("--batch", c.batch, "Sequences per micro-batch per rank")
      ->check(app::integer_in(int64_t{1}, L::kBatch))
      ->capture_default_str();
  app.add_option("--seq", c.seq, "Tokens per sequence (<= the model's max_seq)")
      ->check(app::integer_in(int64_t{1}, L::kSeq))
      ->capture_default_str();
  app.add_option("--grad-accum", c.grad_accum, "Micro-batches per optimizer step")
      ->check(app::integer_in(int64_t{1}, L::kGradAccum))
      ->capture_default_str();
  app.add_option("--dtype", c.dtype, "f32 or f64")->capture_default_str();
  app.add_option("--plan", c.plan, "Subnet plan construction: cyclic or random")
      ->capture_default_str();
  app.add_option("--plan-seed", c.plan_seed, "Seed of random plans")
      ->check(app::integer_in(uint64_t{0}, std::numeric_limits<uint64_t>::max()))
      ->capture_default_str();
  app.add_option("--ffn-groups", c.ffn_groups,
                 "Neuron strategies: FFN unit groups per block (0 = largest <= 4 dividing F)")
      ->check(app::integer_in(int64_t{0}, L::kGroups))
      ->capture_default_str();
  app.add_option("--head-groups", c.head_groups,
                 "Neuron strategies: head groups per block (0 = largest <= 4 dividing the KV "
                 "heads)")
      ->check(app::integer_in(int64_t{0}, L::kGroups))
      ->capture_default_str();
  app.add_option("--channel-groups", c.channel_groups,
                 "Neuron strategies on a ResNet: inner-channel groups per basic block (0 = "
                 "largest <= 8 dividing every width)")
      ->check(app::integer_in(int64_t{0}, L::kGroups))
      ->capture_default_str();
  app.add_option("--data", c.data,
                 "Data spec as in sdp-train (its shapes matter: a ResNet's image size; "
                 "synthetic = the model family's synthetic data)")
      ->capture_default_str();
  app.add_option("--format", o.format, "markdown, csv or json")->capture_default_str();
  app.add_flag("--per-rank", o.per_rank,
               "Add each rank's peak memory and bytes sent (a rank x strategy table; csv: one "
               "row per rank)");
  app.add_option("--output", o.output, "Write the report to FILE instead of stdout");
}

TrainConfig rank_config(const PlannerJob& job, const StrategyRequest& s, int rank) {
  TrainConfig c = job.base;
  c.strategy = s.strategy;
  c.active_fraction = s.active_fraction;
  c.emulate_world = job.world;
  c.emulate_rank = rank;
  return c;
}

PlannerJob resolve_job(const PlanOptions& o) {
  if (o.world < 1 || o.world > kMaxWorld)
    fail("--world = ", o.world, " is invalid (valid: 1 to ", kMaxWorld, ")");
  PlannerJob job;
  job.world = static_cast<int>(o.world);
  job.format = parse_format(o.format);
  job.per_rank = o.per_rank;
  job.output = o.output;

  const bool language_model = model_family(o.base.model) == ModelFamily::llama;
  // One training step on the meta device and nothing else: no evaluation,
  // no files; the strategy fields are set per item.
  TrainConfig& b = job.base;
  b = o.base;
  b.device = "meta";
  b.steps = 1;
  b.eval_every = 0;
  b.progress = false;
  b.metrics.clear();
  b.save_dir.clear();
  b.save_every = 0;
  b.resume.clear();
  b.strategy = "ddp";
  b.active_fraction = 1.0;
  b.emulate_world = job.world;
  b.emulate_rank = 0;
  b.validate();  // the shared fields, with their own names
  if (language_model) {
    const llama::LlamaConfig model = llama::LlamaConfig::named(o.base.model);
    if (b.seq > model.max_seq)
      fail("config: seq = ", b.seq, " exceeds model ", model.name, "'s max_seq ", model.max_seq);
  }

  std::vector<StrategyRequest> requested = parse_strategies(o.strategies);
  job.baseline = -1;
  for (size_t i = 0; i < requested.size(); ++i)
    if (requested[i].strategy == "ddp") {
      job.baseline = 0;
      // Listed first, so that the baseline heads every table.
      job.strategies.push_back(requested[i]);
      requested.erase(requested.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  if (job.baseline < 0) {
    job.baseline = 0;
    job.strategies.push_back({"ddp", "ddp", 1.0, false});
  }
  job.strategies.insert(job.strategies.end(), requested.begin(), requested.end());

  for (const StrategyRequest& s : job.strategies) {
    try {
      const TrainConfig c = rank_config(job, s, 0);
      c.validate();
      // The plan and the storage groups (what the first trainer would refuse).
      SubnetLayout::build(o.base.model, StrategySpec::from_config(c), job.world, 0);
    } catch (const Error& e) {
      fail("--strategies item '", s.text, "': ", e.what());
    }
  }
  return job;
}

}  // namespace sdp::planner
