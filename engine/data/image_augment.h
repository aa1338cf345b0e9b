#pragma once
// Train-time augmentation and per-channel normalization for image sources.
//
// Augmentation (the standard CIFAR recipe): pad the image by `pad` pixels on
// every side with black (raw value 0), crop an H x W window at offsets
// (dy, dx) drawn uniformly from [0, 2 * pad], then flip it left-right with
// probability 1/2. pad = min(H, W) / 8: 4 for 32x32 CIFAR, 1 for 8x8 test
// images (a 4-pixel pad would hide half of a tiny image).
//
// Sources normalize first and augment after, which is the same thing because
// normalization acts on each pixel alone: a black padding pixel becomes the
// normalized value of raw 0, (0 - mean) / std per channel (`fill` below), as
// with torchvision's RandomCrop(padding=4) before Normalize. Synthetic images
// are generated normalized and pad with black too, -2 in every channel
// (synthetic_images.h says why not their mean, 0).
//
// Draws are counter-based: the crop and flip of an image depend only on
// (augment key, image index), and the key on (seed, epoch), so they do not
// depend on the rank or world size and need no saved generator state.
#include <array>
#include <cstdint>

#include "engine/data/image_source.h"

namespace sdp::data {

// CIFAR channel statistics of pixel / 255 over the train split (R, G, B).
inline constexpr std::array<float, 3> kCifar10Mean = {0.4914f, 0.4822f, 0.4465f};
inline constexpr std::array<float, 3> kCifar10Std = {0.2470f, 0.2435f, 0.2616f};
inline constexpr std::array<float, 3> kCifar100Mean = {0.5071f, 0.4865f, 0.4409f};
inline constexpr std::array<float, 3> kCifar100Std = {0.2673f, 0.2564f, 0.2762f};

// (pixel / 255 - mean) / std, in float, in this order (tests recompute it).
inline float normalize_pixel(uint8_t pixel, float mean, float std) {
  return (static_cast<float>(pixel) / 255.0f - mean) / std;
}

// planes: [3, H * W] uint8 (R plane, G plane, B plane); out: [3, H * W].
void normalize_rgb_planes(const uint8_t* planes, int64_t plane_size,
                          const std::array<float, 3>& mean, const std::array<float, 3>& std,
                          float* out);

struct CropFlip {
  int64_t dy = 0;  // crop offset in the padded image, in [0, 2 * pad]
  int64_t dx = 0;
  bool flip = false;
};

int64_t crop_padding(ImageShape shape);

// The augment key of an epoch; draw_crop_flip keys each image under it.
uint64_t augment_key(uint64_t seed, int64_t epoch);
CropFlip draw_crop_flip(uint64_t key, int64_t image_index, int64_t pad);

// src, dst: [C, H, W] (distinct buffers); fill: [C], the value of a padding
// pixel per channel. dst(c, y, x) = padded(c, y + dy, x') with
// x' = W - 1 - x + dx when flipped, else x + dx, where padded is src with
// `pad` fill pixels on every side.
void apply_crop_flip(const float* src, ImageShape shape, int64_t pad, CropFlip crop,
                     const float* fill, float* dst);

}  // namespace sdp::data
