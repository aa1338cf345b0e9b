#include "engine/optim/adamw.h"

#include <cmath>

#include "engine/core/error.h"

namespace sdp {

AdamW::AdamW(TrainingState& state, const AdamWSettings& settings)
    : state_(state), settings_(settings) {
  state_.allocate_adam_state();
  const ParameterSet& params = state_.params();
  segments_.resize(static_cast<size_t>(params.group_count()));
  segment_params_.resize(segments_.size());
  for (int id = 0; id < params.count(); ++id) {
    // Held for the forward only, or a buffer (never trained).
    // Untrained, or a buffer: no update. (An untrained but sharded group
    // keeps its shard's state: backward masking with full sharding.)
    const ParamDecl& d = params.decl(id);
    if (!state_.keeps_training_state(d.group) || d.buffer) continue;
    const double decay =
        d.shape.ndim() >= 2 && !d.no_weight_decay ? settings_.weight_decay : 0.0;
    // Offsets inside this rank's shard of the group (the whole group when
    // it is not sharded); a parameter outside the shard is updated by the
    // rank that holds it.
    const TrainingState::ShardSlice sl = state_.shard_slice(id);
    if (sl.length > 0) {
      segments_[static_cast<size_t>(d.group)].push_back({sl.shard_begin, sl.length, decay});
      segment_params_[static_cast<size_t>(d.group)].push_back(id);
    }
  }
}

void AdamW::update(int64_t step, double lr) {
  ops::AdamWConfig c;
  c.lr = lr;
  c.beta1 = settings_.beta1;
  c.beta2 = settings_.beta2;
  c.eps = settings_.eps;
  c.step = step;
  for (int g = 0; g < state_.params().group_count(); ++g) {
    const auto& segments = segments_[static_cast<size_t>(g)];
    if (segments.empty()) continue;
    Tensor values = state_.shard_values(g), m = state_.shard_adam_m(g),
           v = state_.shard_adam_v(g);
    Tensor low_precision = state_.shard_params(g);
    ops::adamw_update_segments(values, state_.shard_grads(g), m, v, segments, c,
                               state_.has_master(g) ? &low_precision : nullptr);
    // Sums of squares are computed in double: f32 values cannot overflow
    // it, so a non-finite sum means a non-finite value.
    if (!std::isfinite(ops::sum_squares(values))) fail_nonfinite(step, g);
  }
}

void AdamW::fail_nonfinite(int64_t step, int g) const {
  const Tensor values = state_.shard_values(g);
  const auto& segments = segments_[static_cast<size_t>(g)];
  std::string name = format("storage group ", g);
  for (size_t k = 0; k < segments.size(); ++k)
    if (!std::isfinite(
            ops::sum_squares(values.narrow(0, segments[k].offset, segments[k].numel)))) {
      const int id = segment_params_[static_cast<size_t>(g)][k];
      name = "parameter '" + state_.params().decl(id).full_name + "'";
      break;
    }
  // Permanent: a restart resumes the last checkpoint and replays this very
  // update bit for bit.
  throw PermanentError(format("step ", step, ": after the AdamW update ", name,
       " holds values that are not finite (NaN or inf), though the loss and the gradient norm "
       "were finite: the optimizer state is corrupted (a negative second moment, say) or the "
       "update overflowed. Training stopped; nothing of this step was saved"));
}

}  // namespace sdp
