#pragma once
// Export of a model's weights under the names its reference implementation
// uses, so that other implementations load them: Hugging Face LLaMA
// (transformers, bench/torch_ref) or torchvision's ResNet (CIFAR variant):
//   model.safetensors  parameters (and BatchNorm running statistics) under
//                      those names; a tied head is stored once, as
//                      model.embed_tokens.weight (HF convention)
//   config.json        Model::config_json() (for LLaMA the HF config, with
//                      torch_dtype = the dtype of the stored tensors and the
//                      data's special token ids)
// and for LLaMA the tokenizer files of hf_tokenizer.h (generation_config.json,
// tokenizer.json and tokenizer_config.json where the data has a tokenizer).
// Trainer::save_checkpoint writes these files through this function and
// adds its optimizer and trainer state next to them.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/tensor_collection.h"
#include "engine/data/tokenizer_facts.h"
#include "engine/optim/training_state.h"
#include "models/common/model.h"

namespace sdp {

struct HfExportOptions {
  // Above this many bytes of tensors model.safetensors is split into shards
  // with an index (tensor_collection.h).
  uint64_t max_shard_bytes = checkpoint::kDefaultMaxShardBytes;
  // Language models: the tokenizer behind the training data's ids.
  data::TokenizerFacts tokenizer;
};

// Writes model.safetensors (or its shards and index), config.json (and for
// LLaMA the tokenizer files) into `dir` (created if missing; existing files
// of those names are replaced, stale shards of another split removed).
// Every parameter group must be materialized in host memory. The values
// written are the model's parameters, or with `state` its authoritative
// values (the f32 master copies of a bf16 run).
void export_hf_model(const Model& model, const std::filesystem::path& dir,
                     const HfExportOptions& options = {}, const TrainingState* state = nullptr);

// config.json (and for LLaMA generation_config.json and the tokenizer files)
// for weights stored in `stored` (torch_dtype), without writing the weights:
// export_hf_model's files other than model.safetensors.
void write_hf_config(const Model& model, DType stored, const std::filesystem::path& dir,
                     const HfExportOptions& options = {});

// "float32", "float64" or "bfloat16": torch's name of a dtype, as
// config.json's torch_dtype spells it.
const char* torch_dtype_name(DType dtype);

// The full tensors of `p` under prefix + HF name, taking each stored part from
// part_of(id) (its values, or an optimizer moment). Whole tensors are
// referenced in place; pieces are assembled into buffers from `scratch`
// that `keep_alive` owns until the tensors are written. Buffers are
// included only with include_buffers (they have no optimizer moments).
std::vector<checkpoint::NamedTensor> full_named_tensors(
    const ParameterSet& p, const std::function<Tensor(int)>& part_of, const std::string& prefix,
    Allocator& scratch, std::vector<OwnedTensor>& keep_alive, bool include_buffers = true);

// The AdamW moments of every trained parameter as optimizer.safetensors
// holds them: all "exp_avg.<name>" first, then all "exp_avg_sq.<name>".
std::vector<checkpoint::NamedTensor> full_moment_tensors(const TrainingState& state,
                                                       Allocator& scratch,
                                                       std::vector<OwnedTensor>& keep_alive);

// Reads every held parameter of `state` from `weights` (HF names, full tensors;
// pieces take their rows / columns), and, when `moments` is given, the AdamW
// moments of every trained one ("exp_avg.<name>", "exp_avg_sq.<name>"). So a
// checkpoint loads into any cut of the model: another plan, world size or
// granularity.
// Either form of the files (one file or shards) reads the same.
void read_parameter_set(TrainingState& state, const checkpoint::TensorCollection& weights,
                        const checkpoint::TensorCollection* moments);

}  // namespace sdp
