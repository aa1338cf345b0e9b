#pragma once
// The OpenMP threads of an sdp-train process, set before the trainer is
// built: the rule is engine/core/thread_choice.h, fed with this process's
// affinity mask, the ranks of its node (comm/local_rank.h) and
// OMP_NUM_THREADS. Collective under MPI (every rank calls it once).
#include "comm/communicator.h"
#include "engine/core/thread_choice.h"
#include "engine/train/train_config.h"

namespace sdp::app {

// Chooses and sets the threads; the caller prints the choice's message once
// (rank 0), when the run starts training. `world` is the job's
// communicator, null for a single process. A bad OMP_NUM_THREADS is a
// PermanentError.
ThreadChoice set_run_threads(const TrainConfig& config, const comm::Communicator* world);

}  // namespace sdp::app
