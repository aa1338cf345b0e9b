// The linear layer on CUDA (cuBLASLt) against the CPU: y = x w^T, dx = dy w,
// and dw += dy^T x into an f32 dw (accum_dtype) that already holds values,
// so a GEMM that overwrites instead of accumulating fails. K (the summed
// dimension) reaches 1024 in each of the three products.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("linear forward, backward_input and backward_weight on CUDA match the CPU",
          "[ops][linear]") {
  struct Case {
    Shape rows;  // x's leading dims
    int64_t in, out;
  };
  const Case cases[] = {
      {{256}, 1024, 384},   // forward K = 1024
      {{7}, 24, 40},        // tiny and odd
      {{1024}, 64, 96},     // backward_weight K = 1024
      {{2, 5}, 96, 1024},   // [B, T, in] activations; backward_input K = 1024
      {{1}, 768, 2304}};    // one row (a decode-like GEMV)
  for (DType dt : kGpuDtypes)
    for (const Case& c : cases) {
      Shape x_shape = c.rows, y_shape = c.rows;
      x_shape.push_back(c.in);
      y_shape.push_back(c.out);
      CAPTURE(name_of(dt), x_shape.str(), c.out);
      const std::string label = " x " + x_shape.str() + " w [" + std::to_string(c.out) + ", " +
                                std::to_string(c.in) + "]";
      TwinArena a;
      const DType acc = accum_dtype(dt);
      Twin x = a.uniform(x_shape, dt, 1, -1, 1);
      Twin w = a.uniform({c.out, c.in}, dt, 2, -0.05, 0.05);
      Twin y = a.output(y_shape, dt);
      ops::linear_forward(x.dev, w.dev, y.dev);
      ops::linear_forward(x.host, w.host, y.host);
      a.expect_close("linear_forward y" + label, y.dev, y.host, kReduction);

      Twin dy = a.uniform(y_shape, dt, 3, -1, 1);
      Twin dx = a.output(x_shape, dt);
      ops::linear_backward_input(dy.dev, w.dev, dx.dev);
      ops::linear_backward_input(dy.host, w.host, dx.host);
      a.expect_close("linear_backward_input dx" + label, dx.dev, dx.host, kReduction);

      Twin dw = a.uniform({c.out, c.in}, acc, 4, -1, 1);  // accumulated into
      ops::linear_backward_weight(dy.dev, x.dev, dw.dev);
      ops::linear_backward_weight(dy.host, x.host, dw.host);
      a.expect_close("linear_backward_weight dw" + label, dw.dev, dw.host, kReduction);
    }
}
