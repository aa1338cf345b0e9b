// ReLU, global average pooling and bias on CUDA against the CPU. ReLU is
// exact in any dtype (it selects values, never computes them), so it is
// compared exactly, on aligned tensors (16-byte packs), on a view one
// element off alignment (element loads) and in place.
#include <catch2/catch.hpp>
#include <string>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("relu forward and backward_input on CUDA match the CPU", "[ops][relu]") {
  // sizes with a tail after the last whole pack, and a CIFAR-like activation
  const Shape shapes[] = {{1000}, {4, 16, 8, 8}, {3, 5, 7, 7}, {1}};
  for (DType dt : kGpuDtypes)
    for (const Shape& shape : shapes) {
      CAPTURE(name_of(dt), shape.str());
      const std::string label = " x " + shape.str();
      TwinArena a;
      Twin x = a.uniform(shape, dt, 1, -1, 1);
      Twin y = a.output(shape, dt);
      ops::relu_forward(x.dev, y.dev);
      ops::relu_forward(x.host, y.host);
      a.expect_close("relu_forward y" + label, y.dev, y.host, kExact);

      Twin in_place = a.values(shape, dt, host_values(x.host));
      ops::relu_forward(in_place.dev, in_place.dev);
      a.expect_close("relu_forward in place" + label, in_place.dev, y.host, kExact);

      Twin saved_y = a.values(shape, dt, host_values(y.host));
      Twin dy = a.uniform(shape, dt, 2, -1, 1);
      Twin dx = a.output(shape, dt);
      ops::relu_backward_input(dy.dev, saved_y.dev, dx.dev);
      ops::relu_backward_input(dy.host, saved_y.host, dx.host);
      a.expect_close("relu_backward_input dx" + label, dx.dev, dx.host, kExact);

      Twin dy_in_place = a.values(shape, dt, host_values(dy.host));
      ops::relu_backward_input(dy_in_place.dev, saved_y.dev, dy_in_place.dev);
      a.expect_close("relu_backward_input in place of dy" + label, dy_in_place.dev, dx.host,
                     kExact);
    }
}

TEST_CASE("relu on CUDA over views off 16-byte alignment matches the CPU", "[ops][relu]") {
  for (DType dt : kGpuDtypes) {
    CAPTURE(name_of(dt));
    TwinArena a;
    const int64_t n = 515;
    Twin x = a.uniform({n + 1}, dt, 1, -1, 1);
    Twin y = a.output({n + 1}, dt);
    Twin dy = a.uniform({n + 1}, dt, 2, -1, 1);
    Twin dx = a.output({n + 1}, dt);
    // Elements [1, n]: one element past each buffer's (aligned) start.
    Tensor xd = x.dev.narrow(0, 1, n), yd = y.dev.narrow(0, 1, n);
    Tensor xh = x.host.narrow(0, 1, n), yh = y.host.narrow(0, 1, n);
    ops::relu_forward(xd, yd);
    ops::relu_forward(xh, yh);
    a.expect_close("relu_forward y, misaligned view", y.dev.narrow(0, 1, n), yh, kExact);
    Tensor dyd = dy.dev.narrow(0, 1, n), dxd = dx.dev.narrow(0, 1, n);
    Tensor dyh = dy.host.narrow(0, 1, n), dxh = dx.host.narrow(0, 1, n);
    ops::relu_backward_input(dyd, yd, dxd);
    ops::relu_backward_input(dyh, yh, dxh);
    a.expect_close("relu_backward_input dx, misaligned view", dxd, dxh, kExact);
  }
}

TEST_CASE("global average pooling on CUDA matches the CPU", "[ops][pool]") {
  // H W: CIFAR's final 4x4, odd 5x5, 1x1, and a 32x32 map (long rows)
  const Shape shapes[] = {{8, 512, 4, 4}, {2, 3, 5, 5}, {3, 7, 1, 1}, {2, 4, 32, 32}};
  for (DType dt : kGpuDtypes)
    for (const Shape& shape : shapes) {
      CAPTURE(name_of(dt), shape.str());
      const std::string label = " x " + shape.str();
      TwinArena a;
      const Shape pooled{shape[0], shape[1]};
      Twin x = a.uniform(shape, dt, 1, -1, 2);
      Twin y = a.output(pooled, dt);
      ops::global_avg_pool_forward(x.dev, y.dev);
      ops::global_avg_pool_forward(x.host, y.host);
      a.expect_close("global_avg_pool_forward y" + label, y.dev, y.host, kReduction);

      Twin dy = a.uniform(pooled, dt, 2, -1, 1);
      Twin dx = a.output(shape, dt);
      ops::global_avg_pool_backward_input(dy.dev, dx.dev);
      ops::global_avg_pool_backward_input(dy.host, dx.host);
      a.expect_close("global_avg_pool_backward_input dx" + label, dx.dev, dx.host, kElementwise);
    }
}

TEST_CASE("bias add and bias gradient on CUDA match the CPU", "[ops][bias]") {
  struct Case {
    int64_t rows, cols;
  };
  // the CIFAR-10 and -100 classifiers at batch 128, odd widths (element
  // loads), more than one block of 32 columns, and many rows
  const Case cases[] = {{128, 10}, {128, 100}, {7, 3}, {5, 70}, {4096, 64}};
  for (DType dt : kGpuDtypes)
    for (const Case& c : cases) {
      const std::string label =
          " y [" + std::to_string(c.rows) + ", " + std::to_string(c.cols) + "]";
      CAPTURE(name_of(dt), label);
      TwinArena a;
      Twin y = a.uniform({c.rows, c.cols}, dt, 1, -1, 1);
      Twin bias = a.uniform({c.cols}, dt, 2, -1, 1);
      ops::bias_add_forward(y.dev, bias.dev);
      ops::bias_add_forward(y.host, bias.host);
      a.expect_close("bias_add_forward y" + label, y.dev, y.host, kElementwise);

      Twin dy = a.uniform({c.rows, c.cols}, dt, 3, -1, 1);
      Twin dbias = a.uniform({c.cols}, accum_dtype(dt), 4, -1, 1);  // accumulated into
      ops::bias_backward_weight(dy.dev, dbias.dev);
      ops::bias_backward_weight(dy.host, dbias.host);
      a.expect_close("bias_backward_weight dbias" + label, dbias.dev, dbias.host, kReduction);
    }
}
