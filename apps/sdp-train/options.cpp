#include "apps/sdp-train/options.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "apps/integer_option.h"
#include "apps/training_options.h"
#include "engine/core/error.h"
#include "engine/parallel/strategy_table.h"

namespace sdp::app {

namespace {
// (flag name, config field) pairs: flag --grad-accum sets field grad_accum.
std::string field_of(const std::string& flag) {
  std::string f = flag;
  for (char& c : f)
    if (c == '-') c = '_';
  return f;
}

// A boolean flag's text: exactly true or false (CLI11 alone also takes yes,
// on, 1, ... and refuses the rest without saying what is valid).
CLI::Validator true_or_false() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text == "true" || text == "false") return "";
        return "'" + text + "' is invalid (valid: true or false)";
      },
      "true|false");
}
}  // namespace

void add_options(CLI::App& app, CliOptions& o) {
  TrainConfig& c = o.flags;
  namespace L = config_limits;
  app.add_option("--config", o.config_file, "JSON file of config fields (flags override it)");
  app.add_flag("--list-models", o.list_models, "Print the named model configs and exit");
  app.add_flag("--print-config", o.print_config, "Print the effective config as JSON and exit");
  app.add_flag("--dry-run", o.dry_run,
               "Run one step on the meta device (no memory, no arithmetic) and print the "
               "bytes a device would hold per category");

  auto* model = app.add_option_group("Model and data");
  add_training_options(*model, c, {"model", "data"});
  add_model_field_flags(*model, o.model_fields);
  model->add_option("--shuffle", c.shuffle,
                    "Training order (true/false; default true): each epoch a permutation of the "
                    "sequences of text:/llmc: data (windows of seq+1 tokens) or of the images, "
                    "drawn from --seed and the epoch, the same for any number of ranks and "
                    "across resumes; false = file order. The synthetic language (independent "
                    "draws) has no order to shuffle; evaluation reads in file order")
      ->check(true_or_false());
  auto* batch = app.add_option_group("Batch and schedule");
  add_training_option(*batch, c, "batch");
  model->add_option("--drop-path", c.drop_path,
                    "Stochastic depth rate of the last block, linear from 0 at the first (Swin "
                    "only; -1 = the model's default: 0.2 for swin-t, 0 otherwise)");
  add_training_options(*batch, c, {"seq", "grad_accum"});
  batch->add_option("--steps", c.steps, "Optimizer steps")
      ->check(integer_in(int64_t{0}, L::kSteps));
  batch->add_option("--lr", c.lr, "Peak learning rate (0, 10]");
  batch->add_option("--min-lr", c.min_lr,
                    "Learning rate at the end of the cosine decay [0, lr]; default 0.1 x lr "
                    "(unless --config sets it)")
      ->default_str("0.1 x lr");
  batch->add_option("--warmup", c.warmup, "Linear warmup steps")
      ->check(integer_in(int64_t{0}, L::kSteps));
  batch->add_option("--skip-nonfinite", c.skip_nonfinite,
                    "Steps with a non-finite loss or gradient norm that may be skipped (no "
                    "update) before the run stops; 0 = stop at the first")
      ->check(integer_in(int64_t{0}, L::kSteps));
  auto* optim = app.add_option_group("Optimizer (AdamW)");
  optim->add_option("--weight-decay", c.weight_decay, "Decoupled weight decay on matrices [0, 1]");
  optim->add_option("--beta1", c.beta1, "AdamW beta1 [0, 1)");
  optim->add_option("--beta2", c.beta2, "AdamW beta2 [0, 1)");
  optim->add_option("--eps", c.eps, "AdamW epsilon (0, 1]");
  optim->add_option("--grad-clip", c.grad_clip, "Global grad-norm clip; 0 disables (>= 0)");
  auto* eval = app.add_option_group("Evaluation");
  eval->add_option("--eval-every", c.eval_every, "Evaluate every k steps; 0 disables")
      ->check(integer_in(int64_t{0}, L::kSteps));
  eval->add_option("--eval-batches", c.eval_batches, "Validation batches per evaluation")
      ->check(integer_in(int64_t{1}, L::kEvalBatches));
  eval->add_option("--recalibration-images", c.recalibration_images,
                   "ResNets under forward masking: training images on which the assembled full "
                   "model re-estimates its BatchNorm statistics before evaluation and "
                   "checkpoints (0 = keep the gathered ones)")
      ->check(integer_in(int64_t{0}, L::kImages));
  auto* run = app.add_option_group("Execution");
  run->add_option("--seed", c.seed, "Seed of initialization and data")
      ->check(integer_in(uint64_t{0}, std::numeric_limits<uint64_t>::max()));
  run->add_option("--device", c.device, "cpu, cuda, or a dry run: meta (the bytes of a CUDA run) or meta-cpu (of a CPU run)");
  add_training_option(*run, c, "dtype");
  run->add_option("--threads", c.threads,
                  "OpenMP threads per rank; 0 = OMP_NUM_THREADS if set, else this rank's share "
                  "of its cores: the CPUs of its affinity mask divided by the ranks of its "
                  "node that run on them, at least 1 (the choice is printed at the start; at "
                  "most the logical CPUs this process may use)")
      ->check(integer_in(0, max_threads()));
  auto* par = app.add_option_group("Parallelism (launch with mpirun -np N)");
  ParallelSettings& p = c.parallel;
  par->add_option("--strategy", p.strategy, strategy_help());
  par->add_option("--active-fraction", p.active_fraction,
                  "C in (0, 1]: share of components each rank owns, round(C K) of the K "
                  "(halves up; the plan table shows the C held where C K is not whole); "
                  "default 0.5 for the SDP strategies (unless --config sets it), 1 for ddp "
                  "and fsdp (their only value)")
      ->default_str("0.5 SDP, 1 ddp/fsdp");
  add_training_options(*par, c, {"plan", "plan_seed", "ffn_groups", "head_groups", "channel_groups"});
  par->add_option("--shard", p.shard,
                  "Training state partitioned over the ranks sharing each storage group: none, "
                  "optimizer (ZeRO-1: AdamW state), grad (ZeRO-2: + gradients), full (ZeRO-3 / "
                  "FSDP: + parameters); default: the strategy's (full for fsdp, none otherwise). "
                  "fsdp admits only full (use --strategy ddp --shard LEVEL for another)");
  par->add_option("--reshard-after-forward", p.reshard_after_forward,
                  "--shard full: free gathered parameters after their forward and gather them "
                  "again for backward (true/false; default true); ignored at other levels");
  par->add_option("--activation-checkpointing", p.activation_checkpointing,
                  "Blocks that keep only their input and recompute their forward before "
                  "backward: none, block (every block), every:K (every K-th block)");
  add_training_options(*par, c, {"pipeline_stages", "schedule", "stage_blocks", "deferred_weight_grads"});
  par->add_option("--bucket-mb", c.bucket_mb,
                  "Gradient buckets (MiB) reduced during backward; 0 = after backward; "
                  "-1 = auto (25 on cuda, 0 elsewhere); at most 1048576");
  par->add_option("--grad-reduce-dtype", c.grad_reduce_dtype,
                  "Dtype gradients are averaged in: f32, or bf16 (half the bytes; cuda, meta)");
  par->add_option("--comm-timeout", c.comm_timeout,
                  "Seconds a collective may take before the job ends (0 = wait forever; at "
                  "most a year, 31536000)");
  par->add_option("--world", c.world,
                  "Ranks this config is for: a job on another number (mpirun -np, or "
                  "--emulate-world) is refused at start-up; 0 = any. sdp-plan --write-config "
                  "records its --world; --world 0 runs such a config on any world")
      ->check(integer_in(int64_t{0}, L::kWorld));
  par->add_option("--emulate-world", c.emulate_world,
                  "Run one rank of an N-rank job in this process (collectives counted, not "
                  "run); 0 = off")
      ->check(integer_in(int64_t{0}, L::kWorld));
  par->add_option("--emulate-rank", c.emulate_rank, "The rank to emulate (< N)")
      ->check(integer_in(int64_t{0}, L::kWorld - 1));
  auto* io = app.add_option_group("Checkpoints and metrics");
  io->add_option("--save-dir", c.save_dir, "Directory for checkpoints (step-NNNNNN/ and latest)");
  io->add_option("--save-every", c.save_every, "Checkpoint every k steps; 0 = only at the end")
      ->check(integer_in(int64_t{0}, L::kSteps));
  io->add_option("--resume", c.resume, "Checkpoint directory, or a save dir with a 'latest' file");
  io->add_option("--max-shard-size", c.max_shard_size,
                 "Largest checkpoint .safetensors file before sharding (5GB, 500MB, 2GiB, bytes)");
  io->add_option("--checkpoint-format", c.checkpoint_format,
                 "hf: rank 0 writes Hugging Face files; sharded: every rank writes its own "
                 "parts (for large sharded jobs; sdp-export converts to hf). Either resumes");
  io->add_option("--metrics", c.metrics, "JSON-lines metrics file (one line per step + summary)");
  io->add_option("--pipeline-timeline", c.pipeline_timeline,
                 "Directory for the step's schedule drawn before step 1 (schedule.svg; one "
                 "stage running the micro-batches in turn without a pipeline) and "
                 "the last step's measured timeline beside the simulated one (timeline.svg, "
                 "timeline.json, costs.json for sdp-pipeline --costs)");
  io->add_option("--progress", c.progress,
                 "Live progress line when stdout is a terminal and the process is not a rank "
                 "under mpirun or srun (true/false)");
  io->add_option("--log-every", c.log_every,
                 "Where no live line is drawn (a file, a pipe, Slurm, mpirun, --progress "
                 "false): a plain line, flushed, at the first step, every N-th and the last: "
                 "step, loss, lr, tokens/s or images/s, peak memory, ETA; 0 = none")
      ->check(integer_in(int64_t{0}, L::kSteps));
}

namespace {

// The fields given as flags, each with its flag ("grad_accum" -> "--grad-accum").
std::map<std::string, std::string> given_fields(const CLI::App& app) {
  std::map<std::string, std::string> fields;
  auto collect = [&](const CLI::App& from) {
    for (const CLI::Option* opt : from.get_options()) {
      if (opt->count() == 0 || opt->get_lnames().empty()) continue;
      const std::string& flag = opt->get_lnames().front();
      fields[field_of(flag)] = "--" + flag;
    }
  };
  collect(app);
  for (const CLI::App* group : app.get_subcommands({})) collect(*group);
  return fields;
}

nlohmann::json read_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("--config: '", path, "' is a directory (expected a JSON file of config fields)");
  std::ifstream in(path);
  if (!in) fail("--config: cannot open '", path, "'");
  nlohmann::json file;
  try {
    in >> file;
  } catch (const nlohmann::json::exception& e) {
    fail("--config: '", path, "' is not valid JSON: ", e.what());
  } catch (const std::ios_base::failure& e) {
    fail("--config: reading '", path, "' failed: ", e.what());
  }
  if (in.bad()) fail("--config: reading '", path, "' failed");
  return file;
}

// The message of a field error, said from where the value came: its flag,
// or the config file.
[[noreturn]] void rethrow_with_source(const ConfigFieldError& e,
                                      const std::map<std::string, std::string>& flags,
                                      const std::string& config_file) {
  std::string message = e.what();
  const std::string prefix = "config: ";
  if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  const auto flag = flags.find(e.field());
  if (flag != flags.end()) throw ConfigFieldError(e.field(), flag->second + ": " + message);
  if (!config_file.empty())
    throw ConfigFieldError(e.field(), "--config '" + config_file + "': " + message);
  throw e;
}

}  // namespace

TrainConfig resolve_config(const CLI::App& app, const CliOptions& o) {
  const std::map<std::string, std::string> flags = given_fields(app);
  try {
    nlohmann::json merged = TrainConfig().to_json();
    nlohmann::json file_fields = nlohmann::json::object();
    if (!o.config_file.empty()) {
      // from_json rejects unknown fields, wrong types and out-of-range
      // integers with the field's name.
      const nlohmann::json file = read_config_file(o.config_file);
      if (file.is_object()) file_fields = file;
      try {
        merged = TrainConfig::from_json(file).to_json();
      } catch (const ConfigFieldError& e) {
        rethrow_with_source(e, {}, o.config_file);
      }
    }
    // The fields set explicitly, by the file or a flag: the others may take
    // defaults derived from them (min_lr from lr, C from the strategy).
    std::set<std::string> set_fields;
    for (auto it = file_fields.begin(); it != file_fields.end(); ++it) set_fields.insert(it.key());
    const nlohmann::json given = o.flags.to_json();
    for (const auto& [field, flag] : flags)
      if (given.contains(field)) {
        merged[field] = given[field];
        set_fields.insert(field);
      }
    TrainConfig c = TrainConfig::from_json(merged);
    c.model = with_model_field_flags(c.model, o.model_fields);
    c.derive_defaults(set_fields);
    if (o.dry_run) {
      c.device = "meta";
      if (c.steps > 1) c.steps = 1;
      c.eval_every = 0;
    }
    c.validate();
    return c;
  } catch (const ConfigFieldError& e) {
    rethrow_with_source(e, flags, o.config_file);
  }
}

}  // namespace sdp::app
