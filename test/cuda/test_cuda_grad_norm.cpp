// The global gradient norm and clipping by it on CUDA against the CPU,
// over tensors of several shapes in each GPU dtype.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("global_norm and clip_grad_norm on CUDA match the CPU", "[ops][optim]") {
  const Shape shapes[] = {{1000}, {77777}, {1}, {3, 5}};
  const double tol = threshold_for(kReduction, DType::f32);  // norms are doubles
  for (DType dt : kGpuDtypes) {
    CAPTURE(name_of(dt));
    TwinArena a;
    std::vector<Twin> grads;
    for (size_t i = 0; i < std::size(shapes); ++i)
      grads.push_back(a.uniform(shapes[i], dt, 30 + i, -0.5, 0.5));
    std::vector<Tensor> dev, host;
    for (const Twin& g : grads) {
      dev.push_back(g.dev);
      host.push_back(g.host);
    }
    const double norm = ops::global_norm(host);
    expect_close("global_norm [" + name_of(dt) + "]", {ops::global_norm(dev)}, {norm}, tol);

    // above the norm: nothing changes, not even by a rounding
    expect_close("clip_grad_norm (no clipping) norm [" + name_of(dt) + "]",
                 {ops::clip_grad_norm(dev, 2 * norm)}, {norm}, tol);
    for (size_t i = 0; i < grads.size(); ++i)
      a.expect_close("clip_grad_norm (no clipping) tensor " + std::to_string(i), grads[i].dev,
                     grads[i].host, kExact);

    // below: every tensor scaled by max_norm / (norm + 1e-6)
    expect_close("clip_grad_norm norm [" + name_of(dt) + "]",
                 {ops::clip_grad_norm(dev, norm / 3)}, {ops::clip_grad_norm(host, norm / 3)},
                 tol);
    for (size_t i = 0; i < grads.size(); ++i)
      a.expect_close("clip_grad_norm tensor " + std::to_string(i), grads[i].dev, grads[i].host,
                     kReduction);
  }
}
