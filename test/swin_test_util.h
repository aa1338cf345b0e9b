#pragma once
// Helpers of the Swin Transformer tests: swin-micro with random weights
// (LayerNorm gains near 1, bias tables large enough to matter), a batch of
// random 16x16 images, and one training step's loss and gradients as full
// tensors.
#include <memory>
#include <string>

#include "kernels/ops.h"
#include "model_test_util.h"
#include "models/swin/swin_model.h"
#include "test_support.h"

namespace sdp::testing {

inline constexpr int64_t kSwinClasses = 5;

inline swin::SwinConfig swin_micro() { return swin::SwinConfig::named("swin-micro", kSwinClasses); }

inline ModelLayout swin_neuron_layout(int head_groups = 2, int ffn_groups = 2) {
  ModelLayout l;
  l.granularity = Granularity::neuron;
  l.head_groups = head_groups;
  l.ffn_groups = ffn_groups;
  return l;
}

// Random weights of the whole-block swin-micro.
inline Weights swin_random_weights(Arena& arena, uint64_t seed = 100) {
  CpuAllocator alloc;
  swin::SwinModel ref(swin_micro());
  ref.materialize(alloc, DType::f64);
  ParameterSet& p = ref.params();
  for (int id = 0; id < p.count(); ++id) {
    const ParamDecl& d = p.decl(id);
    const bool gain =
        d.name.find("norm") != std::string::npos && d.name.find("weight") != std::string::npos;
    if (gain) {
      fill_uniform(p.param(id), seed + static_cast<uint64_t>(id), 0.5, 1.5);
    } else {
      fill_uniform(p.param(id), seed + static_cast<uint64_t>(id), -0.5, 0.5);
    }
  }
  return full_values(p, false, arena);
}

struct SwinBatch {
  Tensor images;  // [B, 3, 16, 16] f64
  Tensor labels;  // [B] i32
};
inline SwinBatch swin_batch(Arena& arena, int64_t B = 3, uint64_t seed = 7) {
  SwinBatch b{arena.make({B, 3, 16, 16}, DType::f64), arena.make({B}, DType::i32)};
  fill_uniform(b.images, seed, -1.0, 1.0);
  for (int64_t i = 0; i < B; ++i)
    b.labels.data<int32_t>()[i] = static_cast<int32_t>((3 * i + 1) % kSwinClasses);
  return b;
}

inline std::unique_ptr<swin::SwinModel> swin_build(const ModelLayout& layout, CpuAllocator& alloc,
                                                   const Weights& weights, Arena& arena,
                                                   const ComponentFilter& held = {},
                                                   const ComponentFilter& trained = {}) {
  return build_model<swin::SwinModel>(swin_micro(), layout, alloc, weights, arena, held, trained);
}

struct SwinOutcome {
  double loss = 0;
  Weights grads;
};
// One forward and backward (loss scale 1 / B); split = 2BP.
inline SwinOutcome swin_run(swin::SwinModel& m, const SwinBatch& b, Arena& arena,
                            bool split = false) {
  m.params().zero_grads();
  SwinOutcome o;
  o.loss = m.forward(b.images, b.labels);
  m.backward(1.0 / static_cast<double>(b.labels.numel()), split);
  if (split) m.backward_weight();
  o.grads = full_values(m.params(), true, arena);
  return o;
}

}  // namespace sdp::testing
