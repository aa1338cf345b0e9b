// sdp-export: turns a sharded checkpoint (checkpoint_format = "sharded",
// every rank's own file plus an index) into the Hugging Face form in one
// process: model.safetensors, config.json, generation_config.json, the
// tokenizer files, and optimizer.safetensors + sdp_state.json, so the output
// both loads in transformers and resumes with sdp-train --resume.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/checkpoint/byte_size.h"
#include "engine/core/error.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/sharded_checkpoint.h"
#include "engine/train/sharded_export.h"

int main(int argc, char** argv) {
  CLI::App app{"sdp-export: write the Hugging Face form of a sharded sdp-train checkpoint"};
  std::string source, out, max_shard_size = "5GB";
  app.add_option("checkpoint", source,
                 "Sharded checkpoint directory (with sdp_shards.json), or a save dir whose "
                 "'latest' names one")
      ->required();
  app.add_option("out", out, "Directory to write (replaced atomically if it exists)")->required();
  app.add_option("--max-shard-size", max_shard_size,
                 "Largest .safetensors file before sharding (5GB, 500MB, 2GiB, bytes)");
  CLI11_PARSE(app, argc, argv);
  try {
    const uint64_t max_bytes = sdp::checkpoint::parse_byte_size(max_shard_size, "--max-shard-size");
    const auto dir = sdp::resolve_checkpoint(source);
    if (!sdp::is_sharded_checkpoint(dir))
      sdp::fail("'", dir.string(), "' is not a sharded checkpoint (it has no ",
                sdp::kShardIndexFileName, "); a checkpoint of the hf form is already what "
                "sdp-export writes");
    sdp::export_sharded_checkpoint(dir, out, max_bytes);
    std::printf("exported %s to %s\n", dir.c_str(), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sdp-export: error: %s\n", e.what());
    return 1;
  }
}
