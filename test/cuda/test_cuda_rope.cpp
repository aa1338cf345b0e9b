// RoPE on CUDA against the CPU: the cos/sin tables (accum_dtype: f32 in
// both modes), and the rotation forward and backward, out of place and in
// place.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("rope_tables on CUDA match the CPU", "[ops][rope]") {
  struct Case {
    int64_t seq, head_dim;
    double theta;
  };
  for (const Case& c : {Case{200, 16, 10000}, Case{37, 24, 10000}, Case{1024, 128, 500000}}) {
    CAPTURE(c.seq, c.head_dim, c.theta);
    TwinArena a;
    const std::string label = " T=" + std::to_string(c.seq) + " Dh=" + std::to_string(c.head_dim);
    Twin cos = a.output({c.seq, c.head_dim / 2}, DType::f32);
    Twin sin = a.output({c.seq, c.head_dim / 2}, DType::f32);
    ops::rope_tables(c.theta, cos.dev, sin.dev);
    ops::rope_tables(c.theta, cos.host, sin.host);
    a.expect_close("rope_tables cos" + label, cos.dev, cos.host, kElementwise);
    a.expect_close("rope_tables sin" + label, sin.dev, sin.host, kElementwise);
  }
}

TEST_CASE("rope forward and backward_input on CUDA match the CPU, in place too", "[ops][rope]") {
  struct Case {
    int64_t batch, seq, heads, head_dim;
  };
  const Case cases[] = {{2, 37, 3, 24}, {2, 64, 4, 64}, {1, 5, 2, 128}, {3, 1, 2, 16}};
  for (DType dt : kGpuDtypes)
    for (const Case& c : cases) {
      CAPTURE(name_of(dt), c.batch, c.seq, c.heads, c.head_dim);
      const Shape shape{c.batch, c.seq, c.heads, c.head_dim};
      const std::string label = " x " + shape.str();
      TwinArena a;
      const DType acc = accum_dtype(dt);
      // the tables as the CPU computes them, rounded to their dtype on both sides
      Tensor cos64 = a.host({c.seq, c.head_dim / 2}), sin64 = a.host({c.seq, c.head_dim / 2});
      ops::rope_tables(10000, cos64, sin64);
      Twin cos = a.values(cos64.shape(), acc, host_values(cos64));
      Twin sin = a.values(sin64.shape(), acc, host_values(sin64));

      Twin x = a.uniform(shape, dt, 1, -2, 2), y = a.output(shape, dt);
      ops::rope_forward(x.dev, cos.dev, sin.dev, y.dev);
      ops::rope_forward(x.host, cos.host, sin.host, y.host);
      a.expect_close("rope_forward y" + label, y.dev, y.host, kElementwise);
      ops::rope_forward(x.dev, cos.dev, sin.dev, x.dev);  // y aliasing x
      a.expect_close("rope_forward in place" + label, x.dev, y.host, kElementwise);

      Twin dy = a.uniform(shape, dt, 2, -1, 1), dx = a.output(shape, dt);
      ops::rope_backward_input(dy.dev, cos.dev, sin.dev, dx.dev);
      ops::rope_backward_input(dy.host, cos.host, sin.host, dx.host);
      a.expect_close("rope_backward_input dx" + label, dx.dev, dx.host, kElementwise);
      ops::rope_backward_input(dy.dev, cos.dev, sin.dev, dy.dev);  // dx aliasing dy
      a.expect_close("rope_backward_input in place" + label, dy.dev, dx.host, kElementwise);
    }
}
