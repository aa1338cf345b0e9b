#pragma once
// Learning rate: linear warmup from lr/warmup to lr over `warmup` steps, then
// cosine decay to min_lr at `total` steps, constant after.
#include <cstdint>

namespace sdp {

struct LrSchedule {
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup = 0;
  int64_t total = 1;

  // step is 0-based: the rate used by the (step+1)-th optimizer update.
  double at(int64_t step) const;
};

}  // namespace sdp
