#pragma once
// Checkpoint directories of a run: <save_dir>/step-NNNNNN/ plus a `latest`
// file naming the newest complete one (written after it, atomically, so it
// never points at a partial checkpoint).
#include <filesystem>

namespace sdp {

class Trainer;

// The engine's own state file in a checkpoint directory (step, config, data
// position). Not "trainer_state.json": that name belongs to transformers'
// Trainer, whose TrainerState has another schema and would fail on ours.
inline constexpr const char* kStateFileName = "sdp_state.json";
// Checkpoints written before the rename carry the state under this name.
inline constexpr const char* kLegacyStateFileName = "trainer_state.json";

// The state file of checkpoint directory `dir`: sdp_state.json, or the
// legacy name where only that exists.
std::filesystem::path state_file_of(const std::filesystem::path& dir);

// Saves <save_dir>/step-NNNNNN and then points <save_dir>/latest at it.
std::filesystem::path save_and_mark_latest(Trainer& trainer,
                                           const std::filesystem::path& save_dir);

// A checkpoint directory itself (has a state file), or a save dir whose
// `latest` names one. Anything else is an error saying what was expected.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

}  // namespace sdp
