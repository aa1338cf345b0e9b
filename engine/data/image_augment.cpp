#include "engine/data/image_augment.h"

#include <algorithm>

#include "engine/core/counter_rng.h"

namespace sdp::data {

void normalize_rgb_planes(const uint8_t* planes, int64_t plane_size,
                          const std::array<float, 3>& mean, const std::array<float, 3>& std,
                          float* out) {
  for (size_t c = 0; c < 3; ++c) {
    const uint8_t* in = planes + static_cast<int64_t>(c) * plane_size;
    float* o = out + static_cast<int64_t>(c) * plane_size;
    for (int64_t i = 0; i < plane_size; ++i) o[i] = normalize_pixel(in[i], mean[c], std[c]);
  }
}

int64_t crop_padding(ImageShape shape) { return std::min(shape.height, shape.width) / 8; }

uint64_t augment_key(uint64_t seed, int64_t epoch) {
  return splitmix64(splitmix64(seed ^ stable_hash("image-augment")) ^
                    static_cast<uint64_t>(epoch));
}

CropFlip draw_crop_flip(uint64_t key, int64_t image_index, int64_t pad) {
  const uint64_t image_key = splitmix64(key ^ static_cast<uint64_t>(image_index));
  const auto offsets = static_cast<double>(2 * pad + 1);
  // counter_uniform is in (0, 1), so floor(u * n) is in [0, n - 1]; the
  // min() guards the last ulp.
  const auto offset = [&](uint64_t draw) {
    return std::min<int64_t>(static_cast<int64_t>(counter_uniform(image_key, draw) * offsets),
                             2 * pad);
  };
  CropFlip crop;
  crop.dy = offset(0);
  crop.dx = offset(1);
  crop.flip = counter_uniform(image_key, 2) < 0.5;
  return crop;
}

void apply_crop_flip(const float* src, ImageShape shape, int64_t pad, CropFlip crop,
                     const float* fill, float* dst) {
  const int64_t h = shape.height;
  const int64_t w = shape.width;
  for (int64_t c = 0; c < shape.channels; ++c) {
    const float* in = src + c * h * w;
    float* out = dst + c * h * w;
    for (int64_t y = 0; y < h; ++y) {
      const int64_t sy = y + crop.dy - pad;  // source row, maybe in the padding
      float* row = out + y * w;
      if (sy < 0 || sy >= h) {
        std::fill(row, row + w, fill[c]);
        continue;
      }
      for (int64_t x = 0; x < w; ++x) {
        const int64_t px = (crop.flip ? w - 1 - x : x) + crop.dx;  // column in the padded image
        const int64_t sx = px - pad;
        row[x] = (sx < 0 || sx >= w) ? fill[c] : in[sy * w + sx];
      }
    }
  }
}

}  // namespace sdp::data
