#include "engine/optim/adamw.h"

namespace sdp {

AdamW::AdamW(ParameterSet& params, const AdamWSettings& settings)
    : params_(params), settings_(settings) {
  params_.allocate_adam_state();
  segments_.resize(static_cast<size_t>(params_.group_count()));
  for (int id = 0; id < params_.count(); ++id) {
    // Held for the forward only, or a buffer (never trained).
    // Untrained, or a buffer: no update. (An untrained but sharded group
    // keeps its shard's state: backward masking with full sharding.)
    if (!params_.keeps_training_state(params_.decl(id).group) || params_.decl(id).buffer) continue;
    const ParamDecl& d = params_.decl(id);
    const double decay =
        d.shape.ndim() >= 2 && !d.no_weight_decay ? settings_.weight_decay : 0.0;
    // Offsets inside this rank's shard of the group (the whole group when
    // it is not sharded); a parameter outside the shard is updated by the
    // rank that holds it.
    const ParameterSet::ShardSlice sl = params_.shard_slice(id);
    if (sl.length > 0)
      segments_[static_cast<size_t>(d.group)].push_back({sl.shard_begin, sl.length, decay});
  }
}

void AdamW::update(int64_t step, double lr) {
  ops::AdamWConfig c;
  c.lr = lr;
  c.beta1 = settings_.beta1;
  c.beta2 = settings_.beta2;
  c.eps = settings_.eps;
  c.step = step;
  for (int g = 0; g < params_.group_count(); ++g) {
    const auto& segments = segments_[static_cast<size_t>(g)];
    if (segments.empty()) continue;
    Tensor values = params_.shard_values(g), m = params_.shard_adam_m(g),
           v = params_.shard_adam_v(g);
    Tensor low_precision = params_.shard_params(g);
    ops::adamw_update_segments(values, params_.shard_grads(g), m, v, segments, c,
                               params_.has_master(g) ? &low_precision : nullptr);
  }
}

}  // namespace sdp
