#pragma once
// The short single-process runs that trainer-level tests start from: the
// tiny LLaMA on the synthetic language, the tiny CIFAR ResNet and the micro
// Swin on small synthetic images; no periodic evaluation, no progress line.
// Tests change what they exercise on top of them.
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

// resnet-tiny on 8 x 8 synthetic images of 5 classes.
inline TrainConfig tiny_resnet_run() {
  TrainConfig c;
  c.model = "resnet-tiny";
  c.data = "synthetic-images:height=8,width=8,classes=5";
  c.batch = 4;
  c.steps = 6;
  c.warmup = 2;
  c.eval_every = 0;
  c.eval_batches = 2;
  c.progress = false;
  return c;
}

// swin-micro on 16 x 16 synthetic images of 5 classes, with stochastic depth.
inline TrainConfig micro_swin_run() {
  TrainConfig c;
  c.model = "swin-micro";
  c.data = "synthetic-images:height=16,width=16,classes=5";
  c.batch = 4;
  c.steps = 6;
  c.warmup = 2;
  c.eval_every = 0;
  c.eval_batches = 2;
  c.drop_path = 0.3;
  c.progress = false;
  return c;
}

}  // namespace sdp::testing
