#pragma once
// Where sdp-export may write, and how, so that an export never deletes what
// it did not write. The rules, checked on resolved paths (symlinks followed)
// before anything is written:
//   * the output must not be, contain or lie inside the checkpoint exported;
//   * it must not be, contain or lie inside a save directory of sdp-train
//     (a directory with a `latest` file, step-NNNNNN checkpoints or the
//     save-directory lock), whose other checkpoints it would replace;
//   * a new or empty directory, or one that holds only the files of an
//     earlier export, is replaced as a whole, atomically;
//   * any other non-empty directory is refused, unless `force`: then the
//     export's files are written into it one by one (each atomically),
//     replacing files of the same names and keeping every other file; an
//     earlier export's file that this one does not write (another shard
//     count) is refused rather than left to mix two exports.
#include <filesystem>
#include <functional>
#include <string>

namespace sdp {

enum class ExportPlacement {
  whole_directory,  // a new, empty or earlier export's directory: replaced whole
  beside_files,     // --force into a directory holding other files: files added
};

struct ExportDestination {
  std::filesystem::path dir;  // the output, resolved
  ExportPlacement placement = ExportPlacement::whole_directory;
};

// Checks `out` for an export of checkpoint directory `checkpoint` (found
// from `source`, the path as given: the checkpoint or its save directory).
// Throws sdp::PermanentError naming the rule broken and what would be valid.
ExportDestination check_export_destination(const std::filesystem::path& checkpoint,
                                           const std::filesystem::path& source,
                                           const std::filesystem::path& out, bool force);

// Writes the export: `write_into(dir)` creates directory `dir` (absent
// before) with the export's files; this places them at `destination` by its
// placement. Returns how many files the destination held besides the export's.
int write_export(const ExportDestination& destination,
                 const std::function<void(const std::filesystem::path&)>& write_into);

// Whether `name` is one of the files sdp-export (and an hf-form checkpoint)
// writes: model and optimizer safetensors files, their indexes and shards,
// config.json, generation_config.json, tokenizer files, sdp_state.json.
bool is_export_file_name(const std::string& name);

}  // namespace sdp
