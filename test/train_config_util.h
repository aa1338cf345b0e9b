#pragma once
// The short single-process run that trainer-level tests start from: the
// tiny LLaMA on the synthetic language, no periodic evaluation, no progress
// line. Tests change what they exercise on top of it.
#include <cstdint>

#include "engine/train/train_config.h"

namespace sdp::testing {

inline TrainConfig tiny_train_config(int64_t batch = 2, int64_t seq = 16, int64_t steps = 4,
                                     int64_t warmup = 0) {
  TrainConfig c;
  c.model = "tiny";
  c.batch = batch;
  c.seq = seq;
  c.steps = steps;
  c.warmup = warmup;
  c.eval_every = 0;
  c.progress = false;
  return c;
}

}  // namespace sdp::testing
