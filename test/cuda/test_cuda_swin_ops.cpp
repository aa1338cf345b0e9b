// The Swin Transformer's ops on CUDA against the CPU (f64 references):
// LayerNorm, GELU, the per-sample scale, patchify, shifted window partition
// and merge, patch merging, the token mean and window attention with its
// relative position bias and the shifted windows' mask, in f32 and bf16.
// Window attention runs at N = 16 (4 x 4 windows) and N = 49 (7 x 7),
// shifted (with timm's mask) and unshifted (no mask); its table gradient is
// also checked to give the same bits twice. GPU outputs start as NaN, so an
// element a kernel leaves unwritten fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

namespace {

Shape leading_dims(const Shape& shape) { return Shape(shape.begin(), shape.end() - 1); }

// An i32 twin with the given values.
Twin index_twin(TwinArena& a, const Shape& shape, const std::vector<int32_t>& values) {
  Twin t{a.host(shape, DType::i32), a.device(shape, DType::i32)};
  for (int64_t i = 0; i < shape.numel(); ++i) t.host.data<int32_t>()[i] = values[i];
  ops::transfer(t.host, t.dev);
  return t;
}

// timm's relative_position_index of a w x w window: [w w, w w] into a
// table of (2w - 1)^2 rows.
std::vector<int32_t> relative_index(int64_t w) {
  const int64_t n = w * w;
  std::vector<int32_t> index(static_cast<size_t>(n * n));
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b) {
      const int64_t dy = a / w - b / w + w - 1, dx = a % w - b % w + w - 1;
      index[a * n + b] = static_cast<int32_t>(dy * (2 * w - 1) + dx);
    }
  return index;
}

// timm's attention mask of shifted windows on an h x w_img token grid:
// [nW, N, N], -100 between tokens from different regions of the rolled
// image, 0 within one. Token (r, c) of window (i, j) sits at (i w + r,
// j w + c) of the rolled image, whose last w - s and last s rows (and
// columns) are the regions split off from the first w.
std::vector<double> shifted_mask(int64_t height, int64_t width, int64_t w, int64_t s) {
  const auto region = [&](int64_t p, int64_t size) {
    return p < size - w ? 0 : p < size - s ? 1 : 2;
  };
  const int64_t nh = height / w, nw = width / w, n = w * w;
  std::vector<double> mask(static_cast<size_t>(nh * nw * n * n));
  std::vector<int> label(static_cast<size_t>(n));
  for (int64_t i = 0; i < nh; ++i)
    for (int64_t j = 0; j < nw; ++j) {
      for (int64_t t = 0; t < n; ++t)
        label[t] = 3 * region(i * w + t / w, height) + region(j * w + t % w, width);
      double* m = mask.data() + (i * nw + j) * n * n;
      for (int64_t a = 0; a < n; ++a)
        for (int64_t b = 0; b < n; ++b) m[a * n + b] = label[a] == label[b] ? 0.0 : -100.0;
    }
  return mask;
}

}  // namespace

TEST_CASE("layernorm forward, backward_input and backward_weight on CUDA match the CPU",
          "[ops][swin]") {
  // Swin's token layout [B, H, W, C], an odd width (no packs), many rows
  // for the weight sums, a wide row
  const Shape shapes[] = {{2, 8, 8, 96}, {7, 1001}, {4096, 64}, {3, 2048}};
  const double eps = 1e-5;
  for (DType dt : kGpuDtypes)
    for (const Shape& shape : shapes) {
      CAPTURE(name_of(dt), shape.str());
      const std::string label = " x " + shape.str();
      TwinArena a;
      const DType acc = accum_dtype(dt);
      const int64_t d = shape[shape.ndim() - 1];
      const Shape rows = leading_dims(shape);
      // a mean far from zero: the two-pass variance must not cancel
      Twin x = a.uniform(shape, dt, 1, 1, 5);
      Twin weight = a.uniform({d}, dt, 2, 0.5, 1.5), bias = a.uniform({d}, dt, 3, -1, 1);
      Twin y = a.output(shape, dt), mean = a.output(rows, acc), rstd = a.output(rows, acc);
      ops::layernorm_forward(x.dev, weight.dev, bias.dev, eps, y.dev, mean.dev, rstd.dev);
      ops::layernorm_forward(x.host, weight.host, bias.host, eps, y.host, mean.host, rstd.host);
      a.expect_close("layernorm_forward y" + label, y.dev, y.host, kReduction);
      a.expect_close("layernorm_forward mean" + label, mean.dev, mean.host, kReduction);
      a.expect_close("layernorm_forward rstd" + label, rstd.dev, rstd.host, kReduction);

      // backward from the reference's statistics, rounded to their dtype
      Twin saved_mean = a.values(rows, acc, host_values(mean.host));
      Twin saved_rstd = a.values(rows, acc, host_values(rstd.host));
      Twin dy = a.uniform(shape, dt, 4, -1, 1);
      Twin dx = a.output(shape, dt);
      ops::layernorm_backward_input(dy.dev, x.dev, weight.dev, saved_mean.dev, saved_rstd.dev,
                                    dx.dev);
      ops::layernorm_backward_input(dy.host, x.host, weight.host, saved_mean.host,
                                    saved_rstd.host, dx.host);
      a.expect_close("layernorm_backward_input dx" + label, dx.dev, dx.host, kReduction);

      Twin dweight = a.uniform({d}, acc, 5, -1, 1), dbias = a.uniform({d}, acc, 6, -1, 1);
      ops::layernorm_backward_weight(dy.dev, x.dev, saved_mean.dev, saved_rstd.dev, dweight.dev,
                                     dbias.dev);
      ops::layernorm_backward_weight(dy.host, x.host, saved_mean.host, saved_rstd.host,
                                     dweight.host, dbias.host);
      a.expect_close("layernorm_backward_weight dweight" + label, dweight.dev, dweight.host,
                     kReduction);
      a.expect_close("layernorm_backward_weight dbias" + label, dbias.dev, dbias.host,
                     kReduction);

      // dx may alias dy: in place, the same values
      Twin inplace = a.values(shape, dt, host_values(dy.host));
      ops::layernorm_backward_input(inplace.dev, x.dev, weight.dev, saved_mean.dev,
                                    saved_rstd.dev, inplace.dev);
      a.expect_close("layernorm_backward_input dx in place" + label, inplace.dev, dx.host,
                     kReduction);
    }
}

TEST_CASE("gelu and scale_per_sample on CUDA match the CPU", "[ops][swin]") {
  // 16-byte packs with a tail, and an odd sample length (no packs)
  const Shape shapes[] = {{4, 8, 96}, {4, 5, 7}};
  for (DType dt : kGpuDtypes)
    for (const Shape& shape : shapes) {
      CAPTURE(name_of(dt), shape.str());
      const std::string label = " x " + shape.str();
      TwinArena a;
      Twin x = a.uniform(shape, dt, 1, -4, 4);
      Twin y = a.output(shape, dt);
      ops::gelu_forward(x.dev, y.dev);
      ops::gelu_forward(x.host, y.host);
      a.expect_close("gelu_forward y" + label, y.dev, y.host, kElementwise);

      Twin dy = a.uniform(shape, dt, 2, -1, 1);
      Twin dx = a.output(shape, dt);
      ops::gelu_backward_input(dy.dev, x.dev, dx.dev);
      ops::gelu_backward_input(dy.host, x.host, dx.host);
      a.expect_close("gelu_backward_input dx" + label, dx.dev, dx.host, kElementwise);

      // a dropped sample, kept ones scaled by 1 / (1 - p), p = 0.2
      Twin factors = a.values({shape[0]}, accum_dtype(dt), {1.25, 0.0, 1.25, 1.25});
      Twin scaled = a.output(shape, dt);
      ops::scale_per_sample(x.dev, factors.dev, scaled.dev);
      ops::scale_per_sample(x.host, factors.host, scaled.host);
      a.expect_close("scale_per_sample y" + label, scaled.dev, scaled.host, kElementwise);
      ops::scale_per_sample(x.dev, factors.dev, x.dev);  // y may alias x
      a.expect_close("scale_per_sample y in place" + label, x.dev, scaled.host, kElementwise);
    }
}

TEST_CASE("patchify, window partition and merge, patch merging and the token mean on CUDA "
          "match the CPU",
          "[ops][swin]") {
  for (DType dt : kGpuDtypes)
    for (int64_t C : {96, 5}) {  // 16-byte packs of channels, and none
      CAPTURE(name_of(dt), C);
      const std::string label = " C=" + std::to_string(C);
      TwinArena a;
      Twin images = a.uniform({2, C, 8, 12}, dt, 1, -1, 1);
      Twin patches = a.output({2, 4, 6, C * 4}, dt);
      ops::patchify(images.dev, 2, patches.dev);
      ops::patchify(images.host, 2, patches.host);
      a.expect_close("patchify" + label, patches.dev, patches.host, kExact);

      // 8 x 12 tokens in 4 x 4 windows: nH = 2, nW = 3
      const int64_t w = 4;
      const Shape x_shape{2, 8, 12, C}, win_shape{2 * 2 * 3, w * w, C};
      Twin x = a.uniform(x_shape, dt, 2, -1, 1);
      for (int64_t shift : {0, 2, 3}) {
        CAPTURE(shift);
        const std::string at = label + " shift=" + std::to_string(shift);
        Twin windows = a.output(win_shape, dt);
        ops::window_partition(x.dev, w, shift, windows.dev);
        ops::window_partition(x.host, w, shift, windows.host);
        a.expect_close("window_partition" + at, windows.dev, windows.host, kExact);
        Twin back = a.output(x_shape, dt);
        ops::window_merge(windows.dev, w, shift, back.dev);
        a.expect_close("window_merge of window_partition" + at, back.dev, x.host, kExact);
        Twin grads = a.uniform(win_shape, dt, 3, -1, 1);
        Twin merged = a.output(x_shape, dt);
        ops::window_merge(grads.dev, w, shift, merged.dev);
        ops::window_merge(grads.host, w, shift, merged.host);
        a.expect_close("window_merge" + at, merged.dev, merged.host, kExact);
      }

      Twin y = a.output({2, 4, 6, 4 * C}, dt);
      ops::patch_merge_forward(x.dev, y.dev);
      ops::patch_merge_forward(x.host, y.host);
      a.expect_close("patch_merge_forward" + label, y.dev, y.host, kExact);
      Twin dy = a.uniform({2, 4, 6, 4 * C}, dt, 4, -1, 1);
      Twin dx = a.output(x_shape, dt);
      ops::patch_merge_backward_input(dy.dev, dx.dev);
      ops::patch_merge_backward_input(dy.host, dx.host);
      a.expect_close("patch_merge_backward_input" + label, dx.dev, dx.host, kExact);

      Twin mean = a.output({2, C}, dt);
      ops::token_mean_forward(x.dev, mean.dev);
      ops::token_mean_forward(x.host, mean.host);
      a.expect_close("token_mean_forward" + label, mean.dev, mean.host, kReduction);
      Twin dmean = a.uniform({2, C}, dt, 5, -1, 1);
      Twin dtokens = a.output({2, 96, C}, dt);  // [B, L, C] with L = 8 x 12
      ops::token_mean_backward_input(dmean.dev, dtokens.dev);
      ops::token_mean_backward_input(dmean.host, dtokens.host);
      a.expect_close("token_mean_backward_input" + label, dtokens.dev, dtokens.host,
                     kElementwise);
    }
}

TEST_CASE("window attention forward and backward_input on CUDA match the CPU", "[ops][swin]") {
  const int64_t B = 2, H = 3, Dh = 32;
  for (DType dt : kGpuDtypes)
    for (int64_t w : {4, 7})  // N = 16 and 49
      for (bool shifted : {false, true}) {
        const int64_t N = w * w, R = (2 * w - 1) * (2 * w - 1), shift = shifted ? w / 2 : 0;
        const int64_t img = 2 * w, nW = 4, Bw = B * nW;  // a 2 x 2 grid of windows per image
        CAPTURE(name_of(dt), N, shifted);
        const std::string label = " N=" + std::to_string(N) + (shifted ? " shifted" : "");
        TwinArena a;
        const DType acc = accum_dtype(dt);
        const Shape qkv_shape{Bw, N, 3, H, Dh}, out_shape{Bw, N, H, Dh}, p_shape{Bw, H, N, N};
        Twin qkv = a.uniform(qkv_shape, dt, 1, -1.5, 1.5);
        Twin table = a.uniform({R, H}, dt, 2, -1, 1);
        Twin index = index_twin(a, {N, N}, relative_index(w));
        Twin mask_twin = a.values({nW, N, N}, dt, shifted_mask(img, img, w, shift));
        const Tensor mask_dev = shifted ? mask_twin.dev : Tensor();
        const Tensor mask_host = shifted ? mask_twin.host : Tensor();
        const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));

        Twin out = a.output(out_shape, dt), probs = a.output(p_shape, dt);
        ops::window_attention_forward(qkv.dev, table.dev, index.dev, mask_dev, scale, out.dev,
                                      probs.dev);
        ops::window_attention_forward(qkv.host, table.host, index.host, mask_host, scale,
                                      out.host, probs.host);
        a.expect_close("window_attention_forward out" + label, out.dev, out.host, kAttention);
        a.expect_close("window_attention_forward probs" + label, probs.dev, probs.host,
                       kAttention);

        // backward from the reference's probabilities, rounded to their dtype
        const std::vector<double> p_ref = host_values(probs.host);
        Twin saved = a.values(p_shape, dt, p_ref);
        Twin dout = a.uniform(out_shape, dt, 3, -1, 1);
        Twin dqkv = a.output(qkv_shape, dt);
        Twin dtable = a.uniform({R, H}, acc, 4, -1, 1);  // accumulated into
        const std::vector<double> dtable_before = host_values(dtable.host);
        ops::window_attention_backward_input(dout.dev, qkv.dev, saved.dev, index.dev, scale,
                                             dqkv.dev, &dtable.dev);
        ops::window_attention_backward_input(dout.host, qkv.host, saved.host, index.host, scale,
                                             dqkv.host, &dtable.host);
        a.expect_close("window_attention_backward_input dqkv" + label, dqkv.dev, dqkv.host,
                       kAttention);
        a.expect_close("window_attention_backward_input dS in probs" + label, saved.dev,
                       saved.host, kAttention);
        // dtable is f32 next to bf16 but sums score gradients stored in
        // bf16: held to the activation dtype's column
        const std::vector<double> dtable_got = a.download(dtable.dev);
        expect_close("window_attention_backward_input dtable" + label + " [" + name_of(dt) + "]",
                     dtable_got, host_values(dtable.host), threshold_for(kAttention, dt));

        // the same bits again, and without a table gradient the same dqkv
        Twin again = a.values(p_shape, dt, p_ref);
        Twin dtable2 = a.values({R, H}, acc, dtable_before);
        Twin dqkv2 = a.output(qkv_shape, dt);
        ops::window_attention_backward_input(dout.dev, qkv.dev, again.dev, index.dev, scale,
                                             dqkv2.dev, &dtable2.dev);
        CHECK(a.download(dtable2.dev) == dtable_got);
        Twin once_more = a.values(p_shape, dt, p_ref);
        Twin dqkv3 = a.output(qkv_shape, dt);
        ops::window_attention_backward_input(dout.dev, qkv.dev, once_more.dev, index.dev, scale,
                                             dqkv3.dev, nullptr);
        CHECK(a.download(dqkv3.dev) == a.download(dqkv.dev));
      }
}
