// RMSNorm on CUDA against the CPU: forward (y and the saved rstd), the input
// gradient, and the weight gradient accumulated over many rows into an f32
// dweight that already holds values. rstd and dweight are accum_dtype.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("rmsnorm forward, backward_input and backward_weight on CUDA match the CPU",
          "[ops][rmsnorm]") {
  // x shapes: rows below a block, odd widths, many rows for the two-stage
  // weight reduction, a wide row, and [B, T, D] leading dims
  const Shape shapes[] = {{128, 256}, {7, 1000}, {2048, 64}, {3, 4096}, {2, 33, 384}};
  const double eps = 1e-5;
  for (DType dt : kGpuDtypes)
    for (const Shape& shape : shapes) {
      CAPTURE(name_of(dt), shape.str());
      const std::string label = " x " + shape.str();
      TwinArena a;
      const DType acc = accum_dtype(dt);
      const int64_t d = shape[shape.ndim() - 1];
      Twin x = a.uniform(shape, dt, 1, -2, 2);
      Twin weight = a.uniform({d}, dt, 2, 0.5, 1.5);
      const Shape rows = Shape(shape.begin(), shape.end() - 1);
      Twin y = a.output(shape, dt), rstd = a.output(rows, acc);
      ops::rmsnorm_forward(x.dev, weight.dev, eps, y.dev, rstd.dev);
      ops::rmsnorm_forward(x.host, weight.host, eps, y.host, rstd.host);
      a.expect_close("rmsnorm_forward y" + label, y.dev, y.host, kReduction);
      a.expect_close("rmsnorm_forward rstd" + label, rstd.dev, rstd.host, kReduction);

      // backward from the reference's rstd, rounded to its dtype on both sides
      Twin saved_rstd = a.values(rows, acc, host_values(rstd.host));
      Twin dy = a.uniform(shape, dt, 3, -1, 1);
      Twin dx = a.output(shape, dt);
      ops::rmsnorm_backward_input(dy.dev, x.dev, weight.dev, saved_rstd.dev, dx.dev);
      ops::rmsnorm_backward_input(dy.host, x.host, weight.host, saved_rstd.host, dx.host);
      a.expect_close("rmsnorm_backward_input dx" + label, dx.dev, dx.host, kReduction);

      Twin dweight = a.uniform({d}, acc, 4, -1, 1);  // accumulated into
      ops::rmsnorm_backward_weight(dy.dev, x.dev, saved_rstd.dev, dweight.dev);
      ops::rmsnorm_backward_weight(dy.host, x.host, saved_rstd.host, dweight.host);
      a.expect_close("rmsnorm_backward_weight dweight" + label, dweight.dev, dweight.host,
                     kReduction);
    }
}
