// Fused softmax cross-entropy on CUDA against the CPU: losses and lse
// (accum_dtype), ignored rows (negative targets) giving exactly zero, and the
// backward both into its own tensor and in place over the logits.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("cross_entropy forward and backward_input on CUDA match the CPU, in place too",
          "[ops][cross_entropy]") {
  struct Case {
    Shape rows;
    int64_t vocab;
  };
  const Case cases[] = {{{64}, 1003}, {{8}, 32000}, {{2, 3}, 256}, {{1}, 1}};
  for (DType dt : kGpuDtypes)
    for (const Case& c : cases) {
      Shape logits_shape = c.rows;
      logits_shape.push_back(c.vocab);
      CAPTURE(name_of(dt), logits_shape.str());
      const std::string label = " logits " + logits_shape.str();
      TwinArena a;
      const DType acc = accum_dtype(dt);
      const int64_t n = c.rows.numel();
      Twin logits = a.uniform(logits_shape, dt, 1, -8, 8);
      // every fifth row ignored, with either negative marker
      Twin targets = a.integers(c.rows, 2, 0, static_cast<int32_t>(c.vocab));
      int32_t* t = targets.host.data<int32_t>();
      for (int64_t i = 0; i < n; i += 5) t[i] = i % 10 == 0 ? -1 : -100;
      if ((n - 1) % 5 != 0) t[n - 1] = static_cast<int32_t>(c.vocab - 1);  // the last class
      ops::transfer(targets.host, targets.dev);
      int64_t valid = 0;
      for (int64_t i = 0; i < n; ++i) valid += t[i] >= 0;

      Twin losses = a.output(c.rows, acc), lse = a.output(c.rows, acc);
      ops::cross_entropy_forward(logits.dev, targets.dev, losses.dev, lse.dev);
      ops::cross_entropy_forward(logits.host, targets.host, losses.host, lse.host);
      a.expect_close("cross_entropy_forward losses" + label, losses.dev, losses.host, kReduction);
      a.expect_close("cross_entropy_forward lse" + label, lse.dev, lse.host, kReduction);
      const auto loss_values = a.download(losses.dev);
      for (int64_t i = 0; i < n; i += 5) {
        CAPTURE(i);
        CHECK(loss_values[static_cast<size_t>(i)] == 0.0);
      }

      // backward from the reference's lse, rounded to its dtype on both sides
      Twin saved_lse = a.values(c.rows, acc, host_values(lse.host));
      const double grad_scale = valid > 0 ? 1.0 / static_cast<double>(valid) : 1.0;
      Twin dlogits = a.output(logits_shape, dt);
      ops::cross_entropy_backward_input(logits.dev, targets.dev, saved_lse.dev, grad_scale,
                                        dlogits.dev);
      ops::cross_entropy_backward_input(logits.host, targets.host, saved_lse.host, grad_scale,
                                        dlogits.host);
      a.expect_close("cross_entropy_backward_input dlogits" + label, dlogits.dev, dlogits.host,
                     kReduction);
      const auto grad_values = a.download(dlogits.dev);
      for (int64_t i = 0; i < n; i += 5)
        for (int64_t j = 0; j < c.vocab; ++j) {
          const double g = grad_values[static_cast<size_t>(i * c.vocab + j)];
          if (g != 0.0) {
            FAIL_CHECK("ignored row " << i << " has gradient " << g << " at class " << j);
            break;
          }
        }

      // in place: the logits are consumed
      ops::cross_entropy_backward_input(logits.dev, targets.dev, saved_lse.dev, grad_scale,
                                        logits.dev);
      a.expect_close("cross_entropy_backward_input in place" + label, logits.dev, dlogits.host,
                     kReduction);
    }
}
