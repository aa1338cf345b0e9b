// AdamW on CUDA against the CPU: over several steps, and the multi-tensor
// AdamW over many segments (more than one launch's chunk table) with its
// bf16 copy.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

namespace {

ops::AdamWConfig adamw_config() {
  ops::AdamWConfig c;
  c.lr = 1e-2;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.eps = 1e-8;
  c.weight_decay = 0.1;
  return c;
}

// The parameters, gradients and moments of an AdamW test; moments start at
// zero as the optimizer's do.
struct AdamWState {
  Twin param, grad, m, v;
  AdamWState(TwinArena& a, int64_t n)
      : param(a.uniform({n}, DType::f32, 1, -1, 1)),
        grad(a.uniform({n}, DType::f32, 2, -1, 1)),
        m(a.values({n}, DType::f32, std::vector<double>(static_cast<size_t>(n), 0.0))),
        v(a.values({n}, DType::f32, std::vector<double>(static_cast<size_t>(n), 0.0))) {}
  void new_gradient(TwinArena& a, uint64_t seed) {
    grad = a.uniform(grad.dev.shape(), DType::f32, seed, -1, 1);
  }
  void expect_close(TwinArena& a, const std::string& label) {
    a.expect_close(label + " param", param.dev, param.host, kElementwise);
    a.expect_close(label + " m", m.dev, m.host, kElementwise);
    a.expect_close(label + " v", v.dev, v.host, kElementwise);
  }
};

}  // namespace

TEST_CASE("adamw_update on CUDA matches the CPU over three steps", "[ops][optim]") {
  for (int64_t n : {int64_t{5}, int64_t{100003}}) {
    CAPTURE(n);
    TwinArena a;
    AdamWState s(a, n);
    ops::AdamWConfig config = adamw_config();
    for (int64_t step = 1; step <= 3; ++step) {
      config.step = step;
      s.new_gradient(a, 10 + static_cast<uint64_t>(step));
      ops::adamw_update(s.param.dev, s.grad.dev, s.m.dev, s.v.dev, config);
      ops::adamw_update(s.param.host, s.grad.host, s.m.host, s.v.host, config);
    }
    s.expect_close(a, "adamw_update n=" + std::to_string(n) + " after 3 steps");
  }
}

TEST_CASE("adamw_update_segments on CUDA matches the CPU, with and without the bf16 copy",
          "[ops][optim]") {
  // 1500 small segments with gaps between them, alternating decay (norm gains
  // are not decayed), then one large segment, then an untouched tail: the
  // chunk table of one launch cannot hold them all.
  std::vector<ops::AdamWSegment> segments;
  int64_t offset = 3;
  for (int i = 0; i < 1500; ++i) {
    segments.push_back({offset, 17, i % 2 == 0 ? 0.1 : 0.0});
    offset += 17 + 3;
  }
  segments.push_back({offset, int64_t{1} << 20, 0.05});
  const int64_t n = offset + (int64_t{1} << 20) + 5;
  std::vector<bool> in_segment(static_cast<size_t>(n), false);
  for (const auto& s : segments)
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i)
      in_segment[static_cast<size_t>(i)] = true;

  for (bool with_copy : {false, true}) {
    CAPTURE(with_copy);
    const std::string label = std::string("adamw_update_segments ") +
                              (with_copy ? "with" : "without") + " the bf16 copy, after 3 steps";
    TwinArena a;
    AdamWState s(a, n);
    const std::vector<double> initial = host_values(s.param.host);
    // the copy starts as the parameters' bf16 values, so elements outside
    // every segment hold the same value whether the op writes them or not
    Twin copy = a.values({n}, DType::bf16, initial);
    ops::AdamWConfig config = adamw_config();
    for (int64_t step = 1; step <= 3; ++step) {
      config.step = step;
      s.new_gradient(a, 20 + static_cast<uint64_t>(step));
      ops::adamw_update_segments(s.param.dev, s.grad.dev, s.m.dev, s.v.dev, segments, config,
                                 with_copy ? &copy.dev : nullptr);
      ops::adamw_update_segments(s.param.host, s.grad.host, s.m.host, s.v.host, segments,
                                 config);
    }
    s.expect_close(a, label);

    const auto param = a.download(s.param.dev);
    int64_t changed_outside = 0;
    for (size_t i = 0; i < param.size(); ++i)
      if (!in_segment[i] && param[i] != initial[i]) ++changed_outside;
    INFO(changed_outside << " parameters outside every segment changed");
    CHECK(changed_outside == 0);

    if (with_copy) {
      // the copy is exactly the GPU's new f32 values rounded to bf16 ...
      Tensor own = a.host({n}), want = a.host({n});
      const auto ref = host_values(s.param.host);
      for (int64_t i = 0; i < n; ++i) {
        own.data<double>()[i] = round_to(DType::bf16, param[static_cast<size_t>(i)]);
        want.data<double>()[i] = round_to(DType::bf16, ref[static_cast<size_t>(i)]);
      }
      a.expect_close(label + " copy against the GPU's f32 values", copy.dev, own, kExact);
      // ... and so within a bf16 rounding of the reference's
      a.expect_close(label + " copy", copy.dev, want, kElementwise);
    }
  }
}
