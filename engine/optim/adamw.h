#pragma once
// AdamW over a TrainingState: one multi-tensor update per trained storage
// group (its flat buffers cut into one segment per parameter), weight decay
// on matrices only (norm gains and other vectors are not decayed, the usual
// choice for transformers; nor are parameters the model exempts, as Swin's
// relative position bias tables). In mixed precision the f32 master values are
// updated and rounded into the bf16 parameters in the same pass. A sharded
// group (shard_level.h) is updated on this rank's shard only; the owners'
// all-gather of the updated values completes it.
#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "engine/optim/training_state.h"

namespace sdp {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  // Allocates the moments (TrainingState::allocate_adam_state).
  AdamW(TrainingState& state, const AdamWSettings& settings);
  // Applies update number `step` (1-based, for bias correction) at rate lr,
  // then checks the updated values: one that is not finite (a corrupted
  // moment, an overflow) stops training with an sdp::Error naming the step
  // and the parameter, before anything could save it. The check is one
  // sum of squares per group (a pass over the values just written); the
  // parameter is looked for only once a group fails.
  void update(int64_t step, double lr);
  const AdamWSettings& settings() const { return settings_; }

 private:
  // Names the first parameter of group g with a non-finite value; throws.
  [[noreturn]] void fail_nonfinite(int64_t step, int g) const;

  TrainingState& state_;
  AdamWSettings settings_;
  std::vector<std::vector<ops::AdamWSegment>> segments_;  // per group; empty if untrained
  std::vector<std::vector<int>> segment_params_;  // the parameter id of each segment
};

}  // namespace sdp
