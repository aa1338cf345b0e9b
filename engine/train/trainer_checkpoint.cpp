// Trainer::save_checkpoint / load_checkpoint: the on-disk layout of a
// checkpoint directory.
//   model.safetensors      parameters under Hugging Face LLaMA names (the
//                          tied head is stored once, as HF does) or
//                          torchvision ResNet names (with BatchNorm running
//                          statistics: averaged over the ranks where all run
//                          the full model, re-estimated for the assembled
//                          full model under forward masking)
//   config.json            Model::config_json (for LLaMA the HF config, with
//                          the stored dtype and the data's special token ids)
//   generation_config.json LLaMA: the data's bos / eos / pad ids
//   tokenizer.json,        LLaMA on data with a tokenizer (byte-level text,
//   tokenizer_config.json  prepared llm.c shards): AutoTokenizer loads it
//                          (these are written by export_hf_model, hf_export.h)
//   optimizer.safetensors  AdamW moments: "exp_avg.<name>", "exp_avg_sq.<name>"
// Above max_shard_size the two .safetensors files are split into shards
// with an index each, as transformers does (tensor_collection.h).
//   sdp_state.json         step, training config, data position (checkpoint_dir.h)
// The directory is written through a DirectoryTransaction: a crash leaves
// either the previous checkpoint or the new one, never a mix.
// With checkpoint_format = "sharded" every rank writes its own parts instead
// of model / optimizer.safetensors (sharded_checkpoint.h); loading tells the
// forms apart by the index file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/byte_size.h"
#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/tensor_collection.h"
#include "engine/checkpoint/value_check.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/hf_export.h"
#include "engine/train/rank_agreement.h"
#include "engine/train/sharded_checkpoint.h"
#include "engine/train/trainer.h"

#include <algorithm>
#include "models/registry.h"
#include "models/common/parameter_pieces.h"
#include "models/common/tensor_staging.h"

namespace sdp {

namespace fs = std::filesystem;
namespace ck = checkpoint;

namespace {
constexpr int kFormatVersion = 1;
}

void read_parameter_set(TrainingState& state, const ck::TensorCollection& weights,
                        const ck::TensorCollection* moments) {
  const ParameterSet& p = state.params();
  CpuAllocator scratch;
  // Files hold host tensors in the state dtype. Each parameter is read
  // whole on the host and handed to the training state, which keeps what
  // this rank stores of it: all of it, or its slice of a sharded group
  // (and the low-precision copy where one is kept).
  auto read_whole = [&](const ck::TensorCollection& file, const std::string& name,
                        int id) -> OwnedTensor {
    const ParamDecl& d = p.decl(id);
    OwnedTensor host(scratch, d.shape, p.state_dtype(), MemCategory::workspace);
    // A checkpoint of another dtype (an f64 run's into an f32 one) is read
    // as stored and converted.
    const DType stored = file.contains(name) ? file.info(name).dtype : host->dtype();
    if (!d.is_piece() && stored == host->dtype()) {
      file.read_into(name, *host);
    } else if (!d.is_piece()) {
      OwnedTensor as_stored(scratch, d.shape, stored, MemCategory::workspace);
      file.read_into(name, *as_stored);
      stage_copy(*as_stored, *host);
    } else {
      // A piece of a full tensor: read the whole, keep the rows / columns.
      OwnedTensor whole(scratch, d.full_shape, stored, MemCategory::workspace);
      file.read_into(name, *whole);
      Tensor full = *whole;
      OwnedTensor converted;
      if (stored != host->dtype()) {
        converted = OwnedTensor(scratch, d.full_shape, host->dtype(), MemCategory::workspace);
        full = *converted;
        stage_copy(*whole, full);
      }
      copy_full_to_part(d, full, *host);
    }
    return host;
  };
  using Part = TrainingState::Part;
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_materialized(id)) continue;
    const std::string& name = p.decl(id).full_name;
    // Values that would poison the next update (NaN, or a negative second
    // moment whose square root is NaN) are refused here, naming the file.
    auto checked = [](const ck::TensorCollection& file, const std::string& tensor,
                      OwnedTensor t, bool non_negative) {
      ck::check_loaded_values(*t, non_negative, file.path(), tensor);
      return t;
    };
    state.assign(id, Part::values, *checked(weights, name, read_whole(weights, name, id), false));
    if (!moments || !state.keeps_training_state(p.decl(id).group) || p.decl(id).buffer) continue;
    const std::string m = "exp_avg." + name, v = "exp_avg_sq." + name;
    state.assign(id, Part::adam_m, *checked(*moments, m, read_whole(*moments, m, id), false));
    state.assign(id, Part::adam_v, *checked(*moments, v, read_whole(*moments, v, id), true));
  }
}

namespace {

// The first value, AdamW moment or negative second moment among what this
// rank stores that a checkpoint must not hold, described; empty when all
// are valid. One sum of squares per group and part (computed in double, so
// f32 values cannot overflow it); the parameter is looked for only in a
// group that fails.
std::string invalid_training_state(const TrainingState& state) {
  using Part = TrainingState::Part;
  const ParameterSet& p = state.params();
  for (int g = 0; g < p.group_count(); ++g) {
    if (!state.keeps_training_state(g)) continue;
    for (const Part part : {Part::values, Part::adam_m, Part::adam_v}) {
      if (part != Part::values && !state.has_adam_state()) continue;
      const Tensor t = part == Part::values ? state.shard_values(g)
                       : part == Part::adam_m ? state.shard_adam_m(g)
                                              : state.shard_adam_v(g);
      if (std::isfinite(ops::sum_squares(t))) continue;
      const char* what = part == Part::values   ? "values"
                         : part == Part::adam_m ? "AdamW first moment (exp_avg)"
                                                : "AdamW second moment (exp_avg_sq)";
      for (int id = 0; id < p.count(); ++id) {
        if (p.decl(id).group != g) continue;
        const TrainingState::ShardSlice sl = state.shard_slice(id);
        if (sl.length > 0 &&
            !std::isfinite(ops::sum_squares(t.narrow(0, sl.shard_begin, sl.length))))
          return format("the ", what, " of parameter '", p.decl(id).full_name,
                        "' are not finite");
      }
      return format("the ", what, " of storage group ", g, " are not finite");
    }
  }
  return {};
}

}  // namespace

void Trainer::save_checkpoint(const fs::path& dir) {
  ops::ComputeStream::Scope on_stream(*stream_);
  if (alloc_->device() == Device::meta)
    fail("checkpoints need values; a meta (dry) run holds none");
  if (!world_->moves_data())
    fail("checkpoints need every rank's components; an emulated rank (emulate_world = ",
         config_.emulate_world, ") has only its own, so it cannot save one");
  // A checkpoint that would poison every run resumed from it is not
  // written. Every rank checks what it stores and learns whether any
  // failed, so all of them stop here rather than in the save's collectives.
  {
    const std::string invalid = invalid_training_state(*state_);
    bool any_invalid = !invalid.empty();
    if (world_->size() > 1) {
      double* ctl = control_->data<double>();
      std::fill(ctl, ctl + control_->numel(), 0.0);  // the step's figures are not summed here
      ctl[0] = any_invalid ? 1 : 0;
      world_->all_reduce(*control_, comm::ReduceOp::sum);
      any_invalid = ctl[0] > 0;
    }
    // The rank that found it names it; the others end quietly.
    if (!invalid.empty())
      fail("refusing to save checkpoint ", dir.string(), " at step ", step_, ": ", invalid,
           "; nothing was written and latest still names the previous checkpoint");
    if (any_invalid)
      throw CollectiveError(format("refusing to save checkpoint ", dir.string(), " at step ",
                                   step_, ": another rank's training state is not finite"),
                            false);
  }
  const nlohmann::json state = {{"format_version", kFormatVersion},
                                 {"step", step_},
                                 {"train_config", config_.to_json()},
                                 {"data", train_data_->state()},
                                 // Every random draw (initialization, synthetic
                                 // data) is counter-based: the seed and the data
                                 // position above are the whole generator state.
                                 {"rng", {{"kind", "counter-based"}, {"seed", config_.seed}}},
                                 {"parallel", layout_.to_json()}};
  // Each component is written once, whole: rank 0 assembles the full model
  // from the owners (values and AdamW moments); the other ranks only send.
  // Where rank 0 owns every group (one process, DDP) it writes its own model.
  bool rank0_owns_all = true;
  for (const StorageGroup& g : layout_.groups) rank0_owns_all &= g.owners.front() == 0;
  // Shards are whole nowhere: they are assembled like other ranks' groups.
  rank0_owns_all &= !state_->any_sharded();
  merge_buffers();
  if (config_.checkpoint_format == "sharded") {
    // Every rank writes its own parts (sharded_checkpoint.h). Buffers are
    // the one thing the hf form re-estimates on rank 0's assembled full
    // model; the same steps give the same statistics here.
    ShardedSave save;
    save.params = state_.get();
    for (const StorageGroup& g : layout_.groups) save.selection.root.push_back(g.root == world_->rank());
    if (model_->params().has_buffers() && !rank0_owns_all) {
      Model& full = gather_full_model(false);
      if (world_->rank() == 0) {
        recalibrate_full_model(full);
        save.buffers_from = &full.params();
      }
      save.selection.buffers = false;
    }
    if (world_->rank() == 0) {
      save.model = model_.get();
      save.hf.tokenizer = train_data_->tokenizer();
      save.state = state;
      save.header = {world_->size(), model_architecture(model_->config_json()), config_.model,
                     facts_.num_classes, model_->params().state_dtype()};
    }
    save_sharded_checkpoint(*world_, dir, save);
    return;
  }
  Model& source = rank0_owns_all ? *model_ : gather_full_model(true);
  if (world_->rank() == 0 && &source != model_.get()) recalibrate_full_model(source);
  if (world_->rank() != 0) {
    world_->barrier();  // returns once rank 0 has committed the directory
    return;
  }
  const TrainingState& source_state = rank0_owns_all ? *state_ : *full_state_;
  CpuAllocator scratch;
  std::vector<OwnedTensor> assembled;
  const auto moments = full_moment_tensors(source_state, scratch, assembled);
  ck::DirectoryTransaction tx(dir);
  const fs::path& out = tx.staging_dir();
  HfExportOptions hf;
  hf.max_shard_bytes = ck::parse_byte_size(config_.max_shard_size, "max_shard_size");
  hf.tokenizer = train_data_->tokenizer();
  // model.safetensors (the authoritative values: f32 masters where kept),
  // config.json, tokenizer files
  export_hf_model(source, out, hf, &source_state);
  ck::save_tensor_collection(out, "optimizer", moments, hf.max_shard_bytes);
  ck::write_json_atomically(out / kStateFileName, state);
  tx.commit();
  if (world_->size() > 1) world_->barrier();
}

namespace {

// A short rendering of a JSON value for a message (a corrupted file may
// hold anything, of any size).
std::string shown(const nlohmann::json& v) {
  std::string text = v.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// The fields of a state file that loading relies on, checked before any of
// them is used: a corrupted file fails here, naming the file, the field and
// what is valid, rather than later with a bare JSON error or in AdamW.
void check_state_file(const nlohmann::json& state, const fs::path& file) {
  auto bad = [&](const auto&... parts) {
    fail("checkpoint state file '", file.string(), "': ", parts...);
  };
  if (!state.is_object())
    bad("expected a JSON object with format_version, step, train_config and data, got ",
        state.type_name(), " ", shown(state));
  const auto version = state.find("format_version");
  if (version == state.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kFormatVersion)
    bad("format_version ", version == state.end() ? "is missing" : "= " + shown(*version),
        " (this build reads version ", kFormatVersion, ")");
  const auto step = state.find("step");
  if (step == state.end()) bad("field 'step' is missing (valid: an integer in [0, ",
                               config_limits::kSteps, "])");
  constexpr int64_t kMaxStep = config_limits::kSteps;
  const bool step_valid =
      step->is_number_integer() &&
      (step->is_number_unsigned()
           ? step->get<uint64_t>() <= static_cast<uint64_t>(kMaxStep)
           : step->get<int64_t>() >= 0 && step->get<int64_t>() <= kMaxStep);
  if (!step_valid)
    bad("field 'step' = ", shown(*step), " is invalid (valid: an integer in [0, ",
        config_limits::kSteps, "])");
  const auto config = state.find("train_config");
  if (config != state.end() && !config->is_object())
    bad("field 'train_config' = ", shown(*config), " is invalid (valid: an object of config "
        "fields)");
  const auto data = state.find("data");
  if (data == state.end() || !data->is_object())
    bad("field 'data' ", data == state.end() ? "is missing" : "= " + shown(*data) + " is invalid",
        " (valid: the data source's position, an object)");
}

}  // namespace

void Trainer::load_checkpoint(const fs::path& dir) {
  ops::ComputeStream::Scope on_stream(*stream_);
  const fs::path state_file = state_file_of(dir);
  const nlohmann::json state = ck::read_json_file(state_file);
  check_state_file(state, state_file);
  const nlohmann::json saved_model = ck::read_json_file(dir / "config.json");
  // The architecture decides; the stored dtype (f32 / f64) and the data's
  // token ids may differ.
  if (model_architecture(saved_model) != model_architecture(model_->config_json()))
    fail("checkpoint ", dir.string(), " holds model ", describe_model_config(saved_model),
         ", but this run builds ", model_->name(), " (", model_->parameter_count(),
         " parameters)");

  if (is_sharded_checkpoint(dir)) {
    if (ck::tensor_collection_exists(dir, "model"))
      fail("checkpoint ", dir.string(), " holds both forms (", kShardIndexFileName,
           " and model.safetensors); expected one");
    const ShardedCheckpoint sharded(dir);
    if (sharded.architecture() != model_architecture(model_->config_json()))
      fail("checkpoint ", dir.string(), " (", kShardIndexFileName, ") holds another model than ",
           model_->name(), " (", model_->parameter_count(), " parameters)");
    read_sharded_parameter_set(*state_, sharded, true);
  } else {
    const ck::TensorCollection weights(dir, "model");
    const ck::TensorCollection moments(dir, "optimizer");
    read_parameter_set(*state_, weights, &moments);
  }
  // A resumed run reproduces the uninterrupted one only with the same data
  // stream; other fields (steps, lr, ...) may change on purpose.
  const nlohmann::json saved_cfg = state.value("train_config", nlohmann::json::object());
  const nlohmann::json now_cfg = config_.to_json();
  // The data position is global, so another world size resumes the same
  // stream; what a step sees is the global batch (per-rank batch * world),
  // so 4 ranks of batch 2 continue in one process of batch 8.
  const nlohmann::json saved_layout = state.value("parallel", nlohmann::json::object());
  // A pipeline's stages share their replica's batch: what counts is the
  // number of data-parallel replicas (the world without a pipeline).
  const nlohmann::json saved_world =
      saved_layout.value("replicas", saved_layout.value("world", nlohmann::json()));
  auto warn = [](const std::string& what, const std::string& now, const std::string& then) {
    std::fprintf(stderr,
                 "sdp-train: warning: resuming with %s = %s, but the checkpoint was trained "
                 "with %s; the run will not match an uninterrupted one\n",
                 what.c_str(), now.c_str(), then.c_str());
  };
  for (const char* field : {"data", "seed", "seq", "grad_accum"})
    if (saved_cfg.contains(field) && saved_cfg[field] != now_cfg[field])
      warn(field, now_cfg[field].dump(), saved_cfg[field].dump());
  if (saved_cfg.contains("batch") && saved_cfg["batch"].is_number_integer() &&
      saved_world.is_number_integer()) {
    const int64_t then = saved_cfg["batch"].get<int64_t>() * saved_world.get<int64_t>();
    const int64_t now = config_.batch * layout_.replicas;
    if (then != now)
      warn("batch * world", format(config_.batch, " * ", layout_.replicas),
           format(saved_cfg["batch"].get<int64_t>(), " * ", saved_world.get<int64_t>()));
  } else if (saved_cfg.contains("batch") && saved_cfg["batch"] != now_cfg["batch"]) {
    warn("batch", now_cfg["batch"].dump(), saved_cfg["batch"].dump());
  }
  try {
    train_data_->restore(state.at("data"));
  } catch (const Error& e) {
    fail("checkpoint state file '", state_file.string(), "': field 'data': ", e.what());
  }
  step_ = state.at("step").get<int64_t>();
  // Ranks may have read different directories behind the same path.
  require_same_resumed_state(*world_, layout_, *state_, step_, train_data_->state());
}

}  // namespace sdp
