#include "engine/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace sdp {

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const int64_t decay_steps = std::max<int64_t>(1, total - warmup);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(decay_steps));
  const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return min_lr + (lr - min_lr) * cosine;
}

}  // namespace sdp
