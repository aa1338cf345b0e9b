#pragma once
// Checkpoint directories of a run: <save_dir>/step-NNNNNN/ plus a `latest`
// file naming the newest complete one (written after it, atomically, so it
// never points at a partial checkpoint).
#include <filesystem>

namespace sdp {

class Trainer;

// Saves <save_dir>/step-NNNNNN and then points <save_dir>/latest at it.
std::filesystem::path save_and_mark_latest(Trainer& trainer,
                                           const std::filesystem::path& save_dir);

// A checkpoint directory itself (has trainer_state.json), or a save dir whose
// `latest` names one. Anything else is an error saying what was expected.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

}  // namespace sdp
