// Convolution on CUDA (cuDNN) against the CPU: forward, backward_input and
// backward_weight over the geometries of the CIFAR ResNets (3x3 stride 1 and
// 2 with padding 1, 1x1 stride 2 shortcuts) and a few others (no padding,
// odd sizes), each with and without accumulation into the output. One
// workspace of conv2d_workspace_elems(..., Device::cuda) elements, from the
// test's device allocator and poisoned with NaN, serves all three calls, as
// it does in a model. dw (accum_dtype, f32) already holds values: a pass
// that overwrites instead of accumulating fails.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

namespace {

// f32: sums of up to Cin k k = 576 products in f32 (FMA only, never TF32),
// well inside 1e-4; cuDNN's Winograd and FFT algorithms stay there too.
// bf16: inputs are exact bf16 and the products accumulate in f32, but every
// output (dw included: cuDNN writes it in bf16 before it joins the f32
// accumulator) is rounded to bf16 once (4e-3 at most), plus the rounding of
// the accumulated sum: 2e-2.
constexpr Threshold kConv{1e-4, 2e-2};

struct ConvCase {
  int64_t batch, in_channels, out_channels, size, kernel, stride, padding;
};

std::string describe(const ConvCase& c) {
  return "x [" + std::to_string(c.batch) + ", " + std::to_string(c.in_channels) + ", " +
         std::to_string(c.size) + ", " + std::to_string(c.size) + "] w [" +
         std::to_string(c.out_channels) + ", " + std::to_string(c.in_channels) + ", " +
         std::to_string(c.kernel) + ", " + std::to_string(c.kernel) + "] stride " +
         std::to_string(c.stride) + " padding " + std::to_string(c.padding);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("conv2d forward, backward_input and backward_weight on CUDA match the CPU",
          "[ops][conv]") {
#ifndef SDP_HAVE_CUDNN
  WARN("this build has no cuDNN: conv2d on CUDA is not available, nothing to test");
  return;
#endif
  const ConvCase cases[] = {
      {2, 3, 16, 8, 3, 1, 1},      // the stem: 3 input channels, 3x3 stride 1 padding 1
      {3, 16, 32, 9, 3, 2, 1},     // a downsampling 3x3, odd input size
      {2, 16, 32, 8, 1, 2, 0},     // a 1x1 stride-2 shortcut
      {4, 8, 8, 6, 1, 1, 0},       // 1x1 stride 1
      {2, 32, 24, 7, 3, 1, 0},     // 3x3 without padding
      {8, 64, 64, 32, 3, 1, 1},    // a CIFAR ResNet-18 stage-1 conv (K = 576)
      {8, 64, 128, 32, 3, 2, 1},   // the stage-2 entry
      {8, 64, 128, 32, 1, 2, 0},   // and its shortcut
      {16, 128, 96, 4, 3, 1, 1}};  // a late-stage shape: tiny images, many channels
  for (DType dt : kGpuDtypes)
    for (const ConvCase& c : cases)
      for (bool accumulate : {false, true}) {
        std::string label = " ";  // built step by step: GCC 12 warns falsely about " " + string
        label += describe(c);
        if (accumulate) label += " (accumulate)";
        CAPTURE(name_of(dt), label);
        TwinArena a;
        const DType acc = accum_dtype(dt);
        const double threshold = threshold_for(kConv, dt);  // also for dw, see kConv
        const ops::Conv2dGeometry g{c.kernel, c.stride, c.padding};
        const int64_t out = g.out_size(c.size);
        const Shape x_shape{c.batch, c.in_channels, c.size, c.size};
        const Shape w_shape{c.out_channels, c.in_channels, c.kernel, c.kernel};
        const Shape y_shape{c.batch, c.out_channels, out, out};

        Tensor ws_dev =
            a.device({ops::conv2d_workspace_elems(x_shape, w_shape, g, dt, Device::cuda)}, dt);
        Tensor ws_host =
            a.host({ops::conv2d_workspace_elems(x_shape, w_shape, g, DType::f64, Device::cpu)});
        a.poison(ws_dev);

        Twin x = a.uniform(x_shape, dt, 1, -1, 1);
        Twin w = a.uniform(w_shape, dt, 2, -0.25, 0.25);
        Twin y = accumulate ? a.uniform(y_shape, dt, 3, -1, 1) : a.output(y_shape, dt);
        ops::conv2d_forward(x.dev, w.dev, g, y.dev, ws_dev, accumulate);
        ops::conv2d_forward(x.host, w.host, g, y.host, ws_host, accumulate);
        a.expect_close("conv2d_forward y" + label, y.dev, y.host, kConv);

        Twin dy = a.uniform(y_shape, dt, 4, -1, 1);
        Twin dx = accumulate ? a.uniform(x_shape, dt, 5, -1, 1) : a.output(x_shape, dt);
        const std::vector<double> dx_before = a.download(dx.dev);
        ops::conv2d_backward_input(dy.dev, w.dev, g, dx.dev, ws_dev, accumulate);
        ops::conv2d_backward_input(dy.host, w.host, g, dx.host, ws_host, accumulate);
        a.expect_close("conv2d_backward_input dx" + label, dx.dev, dx.host, kConv);

        Twin dw = a.uniform(w_shape, acc, 6, -1, 1);  // accumulated into
        const std::vector<double> dw_before = a.download(dw.dev);
        ops::conv2d_backward_weight(dy.dev, x.dev, g, dw.dev, ws_dev);
        ops::conv2d_backward_weight(dy.host, x.host, g, dw.host, ws_host);
        const std::vector<double> dw_got = a.download(dw.dev);
        expect_close("conv2d_backward_weight dw" + label + " [" + name_of(dt) + "]", dw_got,
                     host_values(dw.host), threshold);

        // The backward passes prefer deterministic cuDNN algorithms: the same
        // call again from the same starting values gives the same bits. Only
        // reported (a non-deterministic algorithm is still correct).
        Twin dx_again = a.values(x_shape, dt, dx_before);
        ops::conv2d_backward_input(dy.dev, w.dev, g, dx_again.dev, ws_dev, accumulate);
        Twin dw_again = a.values(w_shape, acc, dw_before);
        ops::conv2d_backward_weight(dy.dev, x.dev, g, dw_again.dev, ws_dev);
        if (!same_bits(a.download(dx_again.dev), a.download(dx.dev)))
          WARN("conv2d_backward_input" << label << " [" << name_of(dt)
                                       << "]: a second run gave different bits");
        if (!same_bits(a.download(dw_again.dev), dw_got))
          WARN("conv2d_backward_weight" << label << " [" << name_of(dt)
                                        << "]: a second run gave different bits");
      }
}

TEST_CASE("conv2d on CUDA with a workspace larger than needed gives the same result",
          "[ops][conv]") {
#ifndef SDP_HAVE_CUDNN
  WARN("this build has no cuDNN: conv2d on CUDA is not available, nothing to test");
  return;
#endif
  // cuDNN's share is capped by the formula, not by the workspace's size, so
  // the algorithm (and so every bit of the result) does not depend on how
  // generously the caller sized it.
  for (DType dt : kGpuDtypes) {
    CAPTURE(name_of(dt));
    TwinArena a;
    const ops::Conv2dGeometry g{3, 1, 1};
    const Shape x_shape{4, 32, 16, 16}, w_shape{32, 32, 3, 3};
    const int64_t n = ops::conv2d_workspace_elems(x_shape, w_shape, g, dt, Device::cuda);
    Tensor exact = a.device({n}, dt);
    Tensor roomy = a.device({2 * n + 1000}, dt);
    Twin x = a.uniform(x_shape, dt, 1, -1, 1);
    Twin w = a.uniform(w_shape, dt, 2, -0.25, 0.25);
    Twin dy = a.uniform(x_shape, dt, 3, -1, 1);
    Twin y1 = a.output(x_shape, dt), y2 = a.output(x_shape, dt);
    ops::conv2d_forward(x.dev, w.dev, g, y1.dev, exact);
    ops::conv2d_forward(x.dev, w.dev, g, y2.dev, roomy);
    CHECK(same_bits(a.download(y1.dev), a.download(y2.dev)));
    Twin dw1 = a.values(w_shape, accum_dtype(dt), std::vector<double>(w_shape.numel(), 0.0));
    Twin dw2 = a.values(w_shape, accum_dtype(dt), std::vector<double>(w_shape.numel(), 0.0));
    ops::conv2d_backward_weight(dy.dev, x.dev, g, dw1.dev, exact);
    ops::conv2d_backward_weight(dy.dev, x.dev, g, dw2.dev, roomy);
    const std::vector<double> v1 = a.download(dw1.dev), v2 = a.download(dw2.dev);
    // Equal choices give equal bits when the algorithm is deterministic;
    // otherwise the two may differ in the last bits only.
    expect_close("conv2d_backward_weight, exact vs roomy workspace [" + name_of(dt) + "]", v2, v1,
                 1e-5);
  }
}
