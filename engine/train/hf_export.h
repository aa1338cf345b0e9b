#pragma once
// Export of a model's weights under the names its reference implementation
// uses, so that other implementations load them: Hugging Face LLaMA
// (transformers, bench/torch_ref) or torchvision's ResNet (CIFAR variant):
//   model.safetensors  parameters (and BatchNorm running statistics) under
//                      those names; a tied head is stored once, as
//                      model.embed_tokens.weight (HF convention)
//   config.json        Model::config_json() (for LLaMA the HF config)
// Trainer::save_checkpoint writes these two files through this function and
// adds its optimizer and trainer state next to them.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "models/common/model.h"

namespace sdp {

// Writes model.safetensors and config.json into `dir` (created if missing;
// existing files of those names are replaced). Every parameter group must be
// materialized in host memory.
void export_hf_model(const Model& model, const std::filesystem::path& dir);

// The full tensors of `p` under prefix + HF name, taking each stored part from
// part_of(id) (its values, or an optimizer moment). Whole tensors are
// referenced in place; pieces are assembled into buffers from `scratch`
// that `keep_alive` owns until the tensors are written. Buffers are
// included only with include_buffers (they have no optimizer moments).
std::vector<checkpoint::NamedTensor> full_named_tensors(
    const ParameterSet& p, const std::function<Tensor(int)>& part_of, const std::string& prefix,
    Allocator& scratch, std::vector<OwnedTensor>& keep_alive, bool include_buffers = true);

// Reads every held parameter of `p` from `weights` (HF names, full tensors;
// pieces take their rows / columns), and, when `moments` is given, the AdamW
// moments of every trained one ("exp_avg.<name>", "exp_avg_sq.<name>"). So a
// checkpoint loads into any cut of the model: another plan, world size or
// granularity.
void read_parameter_set(ParameterSet& p, const checkpoint::SafetensorsFile& weights,
                        const checkpoint::SafetensorsFile* moments);

}  // namespace sdp
