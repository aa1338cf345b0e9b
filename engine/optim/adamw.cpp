#include "engine/optim/adamw.h"

#include "kernels/ops.h"

namespace sdp {

AdamW::AdamW(ParameterSet& params, const AdamWSettings& settings)
    : params_(params), settings_(settings) {
  params_.allocate_adam_state();
}

void AdamW::update(int64_t step, double lr) {
  ops::AdamWConfig c;
  c.lr = lr;
  c.beta1 = settings_.beta1;
  c.beta2 = settings_.beta2;
  c.eps = settings_.eps;
  c.step = step;
  for (int id = 0; id < params_.count(); ++id) {
    if (!params_.is_trained(id)) continue;  // held for the forward only
    c.weight_decay = params_.decl(id).shape.ndim() >= 2 ? settings_.weight_decay : 0.0;
    Tensor p = params_.param(id), m = params_.adam_m(id), v = params_.adam_v(id);
    ops::adamw_update(p, params_.grad(id), m, v, c);
  }
}

}  // namespace sdp
