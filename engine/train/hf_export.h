#pragma once
// Export of a LlamaModel's weights in the Hugging Face LLaMA layout, so that
// other LLaMA implementations (transformers, bench/torch_ref) load them:
//   model.safetensors  parameters under their HF names; a tied head is stored
//                      once, as model.embed_tokens.weight (HF convention)
//   config.json        LlamaConfig::to_hf_json()
// Trainer::save_checkpoint writes these two files through this function and
// adds its optimizer and trainer state next to them.
#include <filesystem>

#include "models/llama/llama_model.h"

namespace sdp {

// Writes model.safetensors and config.json into `dir` (created if missing;
// existing files of those names are replaced). Every parameter group must be
// materialized in host memory.
void export_hf_model(const llama::LlamaModel& model, const std::filesystem::path& dir);

}  // namespace sdp
