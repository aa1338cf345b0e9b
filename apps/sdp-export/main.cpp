// sdp-export: turns a sharded checkpoint (checkpoint_format = "sharded",
// every rank's own file plus an index) into the Hugging Face form in one
// process: model.safetensors, config.json, generation_config.json, the
// tokenizer files, and optimizer.safetensors + sdp_state.json, so the output
// both loads in transformers and resumes with sdp-train --resume.
// The output is checked before anything is written (export_destination.h):
// an export never replaces a checkpoint, a save directory or files that it
// did not write.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/cli_common.h"
#include "engine/checkpoint/byte_size.h"
#include "engine/core/error.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/export_destination.h"
#include "engine/train/sharded_checkpoint.h"
#include "engine/train/sharded_export.h"

int main(int argc, char** argv) {
  CLI::App app{"sdp-export: write the Hugging Face form of a sharded sdp-train checkpoint"};
  std::string source, out, max_shard_size = "5GB";
  app.add_option("checkpoint", source,
                 "Sharded checkpoint directory (with sdp_shards.json), or a save dir whose "
                 "'latest' names one")
      ->required();
  bool force = false;
  app.add_option("out", out,
                 "Directory to write: new, empty, or an earlier export (replaced atomically). "
                 "Never the checkpoint itself, a save directory with checkpoints, or a "
                 "directory inside or around either")
      ->required();
  app.add_flag("--force", force,
               "Write into a non-empty directory that is no earlier export: the export's files "
               "are added, replacing files of the same names; no other file is deleted");
  app.add_option("--max-shard-size", max_shard_size,
                 "Largest .safetensors file before sharding (5GB, 500MB, 2GiB, bytes)");
  sdp::app::add_version_flag(app, "sdp-export");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return sdp::app::report_parse_error(app, "sdp-export", e);
  }
  try {
    const uint64_t max_bytes = sdp::checkpoint::parse_byte_size(max_shard_size, "--max-shard-size");
    const auto dir = sdp::resolve_checkpoint(source);
    if (!sdp::is_sharded_checkpoint(dir))
      sdp::fail("'", dir.string(), "' is not a sharded checkpoint (it has no ",
                sdp::kShardIndexFileName, "); a checkpoint of the hf form is already what "
                "sdp-export writes");
    const sdp::ExportDestination destination =
        sdp::check_export_destination(dir, source, out, force);
    const int others = sdp::write_export(destination, [&](const std::filesystem::path& into) {
      sdp::export_sharded_checkpoint(dir, into, max_bytes);
    });
    std::printf("exported %s to %s", dir.c_str(), out.c_str());
    if (others > 0) std::printf(" (beside the %d other entr%s it held)", others,
                                others == 1 ? "y" : "ies");
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sdp-export: error: %s\n", e.what());
    return 1;
  }
}
