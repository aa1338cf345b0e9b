#pragma once
#include "engine/train/train_config.h"

namespace sdp::app {

// Runs the training loop of `config` (metrics, evaluation, checkpoints) and
// prints the summary; with dry_run, prints the memory table of one step on
// the meta device instead. Returns the process exit code.
int run_training(const TrainConfig& config, bool dry_run);

}  // namespace sdp::app
