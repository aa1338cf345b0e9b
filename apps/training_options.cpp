#include "apps/training_options.h"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "apps/integer_option.h"
#include "engine/core/config_limits.h"
#include "engine/core/error.h"
#include "models/common/config_json.h"
#include "models/common/model_spec.h"

namespace sdp::app {

namespace {

// One shared flag. Integer fields are checked in [lo, hi] (integer_in, in
// the field's own type); other fields are checked by TrainConfig::validate.
struct SharedFlag {
  const char* field;  // the config field (its JSON key)
  const char* names;  // CLI11 names: "--grad-accum,--micro-batches"
  const char* help;   // true for every model family and every app
  int64_t lo = 0;
  uint64_t hi = 0;    // 0: no integer range
};

constexpr uint64_t kAnyUnsigned = std::numeric_limits<uint64_t>::max();

// clang-format off
const SharedFlag kSharedFlags[] = {
    {"model", "--model",
     "Named model (sdp-train --list-models): LLaMA tiny, mini, small, small-32k, llama-134m, "
     "llama-500m, llama-1b; CIFAR ResNets resnet-tiny, resnet-mini, resnet18, wrn18, "
     "resnet152-basic; CIFAR Swin Transformers swin-micro, swin-mini, swin-t. Or a custom "
     "model: NAME:key=value,... (LLaMA keys vocab, layers, dim, heads, kv_heads, ffn, max_seq, "
     "rope_theta, norm_eps, tie; ResNet widths, blocks as 4 '-'-joined sizes; Swin embed, "
     "depths, heads, window, img, patch, mlp_ratio), e.g. mini:layers=8 (a custom LLaMA "
     "without vocab takes the data's), or config:PATH (a Hugging Face LLaMA config.json)"},
    {"data", "--data",
     "LLaMA tokens: synthetic[:vocab=V,seed=S], text:PATH (bytes), llmc:PATH[,PATH...] (llm.c "
     ".bin shards). Images (ResNet, Swin): synthetic (= synthetic-images[:classes=K,...]), "
     "cifar10:DIR, cifar100:DIR"},
    {"batch", "--batch", "Sequences (LLaMA) or images (ResNet, Swin) per micro-batch per rank",
     1, config_limits::kBatch},
    {"seq", "--seq", "Tokens per sequence (<= the model's max_seq; LLaMA only)",
     1, config_limits::kSeq},
    {"grad_accum", "--grad-accum,--micro-batches",
     "Micro-batches per optimizer step (per replica); with a pipeline, its M",
     1, config_limits::kGradAccum},
    {"dtype", "--dtype",
     "f32, f64 (cpu) or bf16 (cuda: bf16 parameters and activations, f32 master weights, "
     "gradients and AdamW state)"},
    {"plan", "--plan",
     "Subnet plan: cyclic, random, weighted:W0,W1,... (ranks of unequal memory: one weight or "
     "size per rank, e.g. weighted:80GiBx4,40GiBx4; the round(C K) N ownerships are shared "
     "by weight, owners per component within one), or file:PATH (an ownership matrix, "
     "{\"matrix\": [\"1010\", \"0101\"]}: a row of 0/1 per rank, or per replica of a pipeline "
     "stage)"},
    {"plan_seed", "--plan-seed", "Seed of random plans", 0, kAnyUnsigned},
    {"ffn_groups", "--ffn-groups",
     "Neuron strategies: FFN unit groups per block (0 = largest <= 4 dividing F)",
     0, config_limits::kGroups},
    {"head_groups", "--head-groups",
     "Neuron strategies: head groups per block (0 = largest <= 4 dividing the KV heads)",
     0, config_limits::kGroups},
    {"channel_groups", "--channel-groups",
     "Neuron strategies on a ResNet: inner-channel groups per basic block (0 = largest <= 8 "
     "dividing every width)",
     0, config_limits::kGroups},
    {"pipeline_stages", "--pipeline-stages",
     "Pipeline stages P (1 = none); the world is P x D ranks, stage s on ranks s D .. s D + D - "
     "1, its D replicas running the strategy (its plan) among themselves",
     1, config_limits::kPipelineStages},
    {"schedule", "--schedule",
     "Pipeline schedule: gpipe, 1f1b, gpipe-2bp, 1f1b-2bp (two-stage backward: weight "
     "gradients deferred), zb-h1, 1f1b-2bp-cooldown (1f1b-2bp with deferred weight gradients "
     "run in the cool-down's bubbles), naive, naive-2bp (no pipelining: one micro-batch at a "
     "time), or file:PATH (a schedule JSON)"},
    {"stage_blocks", "--stage-blocks",
     "Blocks per pipeline stage, e.g. 3,3,3,3 (uneven allowed); default: balanced by counted "
     "FLOPs"},
    {"deferred_weight_grads", "--deferred-weight-grads",
     "How a split schedule (one with W actions: gpipe-2bp, 1f1b-2bp, zb-h1, 1f1b-2bp-cooldown, "
     "naive-2bp, a file with I/W) runs its deferred weight gradients: per-micro-batch (each W "
     "alone), or batched (each run of adjacent W actions of a stage as one W: every linear "
     "weight's gradient one GEMM over the micro-batches' concatenated inputs and output "
     "gradients, as the 2BP authors do; norm gains, embeddings and convolutions per "
     "micro-batch)"},
};
// clang-format on

const SharedFlag& shared_flag(const std::string& field) {
  for (const SharedFlag& f : kSharedFlags)
    if (field == f.field) return f;
  throw std::logic_error("no shared flag for config field '" + field + "'");
}

template <typename T>
CLI::Option* add_bound(CLI::App& to, const SharedFlag& flag, T& value) {
  CLI::Option* option = to.add_option(flag.names, value, flag.help);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (flag.hi != 0) option->check(integer_in(static_cast<T>(flag.lo), static_cast<T>(flag.hi)));
  } else if (flag.hi != 0) {
    throw std::logic_error(std::string("shared flag ") + flag.names +
                           " has an integer range but its field is not an integer");
  }
  return option;
}

}  // namespace

CLI::Option* add_training_option(CLI::App& to, TrainConfig& config, const std::string& field) {
  const SharedFlag& flag = shared_flag(field);
  // The field's member by its name, through the config's own field lists,
  // so a shared flag cannot name a field that does not exist.
#define SDP_BIND(f) \
  if (field == #f) return add_bound(to, flag, config.f);
#define SDP_BIND_PARALLEL(f) \
  if (field == #f) return add_bound(to, flag, config.parallel.f);
  SDP_TRAIN_CONFIG_FIELDS(SDP_BIND)
  SDP_PARALLEL_SETTINGS_FIELDS(SDP_BIND_PARALLEL)
#undef SDP_BIND_PARALLEL
#undef SDP_BIND
  throw std::logic_error("shared flag " + std::string(flag.names) + " names no config field '" +
                         field + "'");
}

std::vector<CLI::Option*> add_training_options(CLI::App& to, TrainConfig& config,
                                               std::initializer_list<const char*> fields) {
  std::vector<CLI::Option*> options;
  for (const char* field : fields) options.push_back(add_training_option(to, config, field));
  return options;
}

void add_model_field_flags(CLI::App& to, ModelFieldFlags& flags) {
  to.add_option("--vocab-size", flags.vocab_size,
                "Sets the --model's vocabulary (adds vocab=N to its spec; e.g. --model mini "
                "--vocab-size 1024 for a 1k-token tokenizer's data); 0 = the model's own")
      ->check(integer_in(int64_t{0}, model_config::kMaxSize));
  to.add_option("--layers", flags.layers,
                "Sets the --model's blocks (LLaMA; adds layers=L to its spec); 0 = the model's "
                "own")
      ->check(integer_in(int64_t{0}, model_config::kMaxSize));
}

std::string with_model_field_flags(const std::string& model, const ModelFieldFlags& flags) {
  std::string spec = model;
  auto set = [&](const char* flag, const char* key, int64_t value) {
    if (value <= 0) return;
    try {
      spec = with_model_override(spec, key, std::to_string(value));
    } catch (const Error& e) {
      fail(flag, ": ", e.what());
    }
  };
  set("--vocab-size", "vocab", flags.vocab_size);
  set("--layers", "layers", flags.layers);
  return spec;
}

CLI::Option* add_training_option(CLI::App& to, std::string& value, const std::string& field) {
  // The same type as the config field: a string flag bound elsewhere.
  bool is_string = false;
#define SDP_IS_STRING(f) \
  if (field == #f) is_string = std::is_same_v<decltype(TrainConfig::f), std::string>;
#define SDP_IS_STRING_PARALLEL(f) \
  if (field == #f) is_string = std::is_same_v<decltype(ParallelSettings::f), std::string>;
  SDP_TRAIN_CONFIG_FIELDS(SDP_IS_STRING)
  SDP_PARALLEL_SETTINGS_FIELDS(SDP_IS_STRING_PARALLEL)
#undef SDP_IS_STRING_PARALLEL
#undef SDP_IS_STRING
  if (!is_string) throw std::logic_error("config field '" + field + "' is not a string");
  return add_bound(to, shared_flag(field), value);
}

}  // namespace sdp::app
