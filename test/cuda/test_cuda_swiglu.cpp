// SwiGLU on CUDA against the CPU, forward and both input gradients, with
// gates far enough out that silu's saturation is exercised.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("swiglu forward and backward_input on CUDA match the CPU", "[ops][swiglu]") {
  const Shape shapes[] = {{64, 688}, {3, 1001}, {2, 16, 176}, {1, 1}};
  for (DType dt : kGpuDtypes)
    for (const Shape& shape : shapes) {
      CAPTURE(name_of(dt), shape.str());
      const std::string label = " x " + shape.str();
      TwinArena a;
      Twin gate = a.uniform(shape, dt, 1, -12, 12), up = a.uniform(shape, dt, 2, -2, 2);
      Twin out = a.output(shape, dt);
      ops::swiglu_forward(gate.dev, up.dev, out.dev);
      ops::swiglu_forward(gate.host, up.host, out.host);
      a.expect_close("swiglu_forward out" + label, out.dev, out.host, kElementwise);

      Twin dout = a.uniform(shape, dt, 3, -1, 1);
      Twin dgate = a.output(shape, dt), dup = a.output(shape, dt);
      ops::swiglu_backward_input(dout.dev, gate.dev, up.dev, dgate.dev, dup.dev);
      ops::swiglu_backward_input(dout.host, gate.host, up.host, dgate.host, dup.host);
      a.expect_close("swiglu_backward_input dgate" + label, dgate.dev, dgate.host, kElementwise);
      a.expect_close("swiglu_backward_input dup" + label, dup.dev, dup.host, kElementwise);
    }
}
