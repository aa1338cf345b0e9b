#pragma once
// What the ranks of a job must agree on beyond the run configuration and the
// subnet plan (both checked when the trainer is built). A disagreement here
// does not fail by itself: collectives of different sizes overrun buffers
// (memory corruption in the MPI library), and equal sizes over different
// contents let replicas drift apart silently. Each check is one small
// collective over the world and throws sdp::CollectiveError with the same
// text on every rank, built from the gathered values only, so the job ends
// at once with one message naming what differs.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "engine/parallel/strategy.h"
#include "engine/optim/training_state.h"
#include "models/common/parameter_set.h"

namespace sdp {

// The sizes and dtypes of every storage group: the buffers of the gradient
// all-reduces, broadcasts and gathers. Config and plan fix them for one
// build of the model code; this catches ranks running different builds.
void require_same_group_sizes(comm::Communicator& world, const ParameterSet& params);

// After every rank has loaded its checkpoint (ranks may read different
// directories under the same relative path): the same step, the same data
// position (the source's state, which names the data it came from) and, for
// every storage group, the same contents on every rank holding it
// (parameters as the forward reads them, and buffers, on every holder;
// master values and AdamW moments on every owner), by 64-bit hashes.
void require_same_resumed_state(comm::Communicator& world, const SubnetLayout& layout,
                                const TrainingState& state, int64_t step,
                                const nlohmann::json& data_state);

// A 64-bit hash of a contiguous tensor's bytes (device tensors through a
// host copy; 0 on the meta device, which holds no values). Not
// cryptographic: it tells accidental differences apart.
uint64_t tensor_content_hash(const Tensor& t, uint64_t seed = 0);

}  // namespace sdp
