#pragma once
// The Hugging Face form of a sharded checkpoint (sharded_checkpoint.h),
// written by one process: the directory a job with checkpoint_format = "hf"
// would have written at the same step, so transformers loads it and
// sdp-train resumes from it.
//   model.safetensors      every tensor whole (shards with an index above
//                          max_shard_bytes), as export_hf_model writes it
//   optimizer.safetensors  the AdamW moments, as save_checkpoint writes them
//   config.json, generation_config.json, tokenizer files, sdp_state.json
//                          copied from the sharded checkpoint, where the
//                          writer put the same files the hf form has
// The model is built by the name in sdp_state.json's train_config, whole, on
// the host, in the stored state dtype; the output directory is written
// atomically (DirectoryTransaction).
#include <cstdint>
#include <filesystem>

namespace sdp {

void export_sharded_checkpoint(const std::filesystem::path& checkpoint,
                               const std::filesystem::path& out, uint64_t max_shard_bytes);

}  // namespace sdp
