#pragma once
#include "engine/train/train_config.h"

namespace sdp::app {

// Runs the training loop of `config` (metrics, evaluation, checkpoints) and
// prints the summary; with dry_run, prints the memory table of one step on
// the meta device instead. With use_mpi, this process is one rank of the MPI
// world (rank 0 prints and writes metrics). Returns the process exit code.
int run_training(const TrainConfig& config, bool dry_run, bool use_mpi);

}  // namespace sdp::app
