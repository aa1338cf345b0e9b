#pragma once
// A seeded synthetic image classification set, generated on the fly: no
// download, any size, learnable by a small CNN but not by a linear model.
//
// Each class k has a prototype: per channel, a sum of a few plane waves
//   P_k[c, y, x] = sum_j w_kj[c] cos(2 pi (fx_kj x / W + fy_kj y / H) + phi_kj)
// with integer frequencies (fx, fy) of at most F cycles per image along each
// axis (F = min(H, W) / 8, at least 1: 4 at 32x32), random colour weights w
// and phases phi; each channel is then scaled to mean 0 and standard
// deviation 1 over the image.
// So a class is a texture: a mix of orientations, frequencies and colour
// correlations.
//
// Image i of a split has label i mod K (balanced when K divides the split
// size) and is its class's prototype circularly shifted by (dy, dx), each
// uniform over the shifts [-shift, shift] (default: all positions), scaled
// by a contrast a uniform in [0.5, 1.5], plus independent pixel noise n of
// mean 0 and variance 1 (nearly normal: a centred sum of four uniforms):
//   image = (a * shifted P + noise * n) / sqrt(E[a^2] + noise^2)
// The integer frequencies make the circular shift a phase change, so the
// image stays smooth. The division makes every channel mean 0, variance 1
// over the data: the images come normalized, and no further normalization
// is applied. Averaged over all shifts every prototype is 0, so a linear
// classifier on pixels is at chance with the default shift, while
// translation-invariant features (convolutions + global pooling) separate
// the classes; `noise` sets how hard that is.
//
// The default noise was tuned with a throwaway numpy model (not in the
// repo) on 32x32 images, 400 steps of batch 32, Adam lr 3e-3: a 3-layer CNN
// (16-32-32 channels, 3x3 convs, global average pooling) reaches val loss
// 1.9 at step 100, 0.5 at step 200 and 0.26 at step 400 (ln 10 = 2.30),
// with augmentation about the same; softmax regression on the pixels stays
// at chance (val accuracy 0.09-0.11). With noise 1 the CNN is at 99% after
// 100 steps (too easy); with noise 6 it leaves ln 10 only after 300 steps.
// Smaller images hold fewer pixels to average the noise over, so the
// default scales with sqrt(H * W); at 8x8 (noise 0.75) the same CNN reaches
// val loss 0.28 at step 100 and 0.03 at step 400: easier, as tiny test
// models should converge fast (at 8x8 with noise 3 it is still at 1.5 at
// step 400).
// Crop padding fills with black, as a camera image normalized per channel
// would: kPaddingValue (-2) in every channel, about CIFAR's black under its
// usual normalization (-1.7 to -2.0 per channel). Not 0, the data mean: a
// padded patch of zeros is mapped by a patch embedding to its bias, 0 at
// initialization, and the LayerNorm after it then divides by sqrt(eps)
// (a Swin's first gradients grew 1500-fold, measured).
//
// Every draw is counter-based on (dataset seed, split, image index), so an
// image costs O(C H W) to make and needs nothing but the prototypes
// ([classes, C, H, W] floats, 120 KB for the defaults). Train and val share
// the prototypes (the same classes) and draw from independent streams.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/indexed_image_source.h"

namespace sdp::data {

struct SyntheticImagesConfig {
  int64_t classes = 10;        // 2 .. 1000
  int64_t train_size = 50000;  // images in the train split, >= 1
  int64_t val_size = 10000;    // images in the val split, >= 1
  uint64_t dataset_seed = 1;   // picks the prototypes and every image
  double noise = -1.0;         // pixel noise std relative to the prototype; >= 0,
                               // or < 0 for the default (see noise_std())
  int64_t shift = -1;          // max circular shift in pixels; < 0: all positions
  ImageShape shape{};          // channels 1 .. 16, height and width 4 .. 256
};

class SyntheticImages : public IndexedImageSource {
 public:
  static constexpr float kPaddingValue = -2.0f;  // crop padding, every channel
  // `seed` keys the train shuffle and augmentation, as for every source; the
  // images themselves depend on config.dataset_seed alone.
  SyntheticImages(SyntheticImagesConfig config, uint64_t seed, Split split = Split::train,
                  StreamPart part = {}, ImageSourceOptions options = {});

  ImageShape image_shape() const override { return config_.shape; }
  int64_t num_classes() const override { return config_.classes; }
  std::string describe() const override;
  const SyntheticImagesConfig& config() const { return config_; }
  // [C, H, W]: class k's prototype, unshifted, mean 0 and std 1 per channel.
  const float* prototype(int64_t k) const;
  // The largest frequency (cycles per image, along each axis) of the waves.
  int64_t max_frequency() const;
  // The pixel noise std in use: config.noise, or by default
  // 3 * sqrt(H * W / 1024), i.e. 3 at 32x32 and 0.75 at 8x8 (see below).
  double noise_std() const;

 protected:
  int32_t load(int64_t index, float* image) const override;
  const float* padding_fill() const override { return black_.data(); }
  nlohmann::json identity() const override;
  std::string error_name() const override { return "synthetic-images source"; }

 private:
  void build_prototypes();

  SyntheticImagesConfig config_;
  std::vector<float> prototypes_;  // [classes, C, H, W]
  std::vector<float> black_;       // [C]: kPaddingValue per channel
};

}  // namespace sdp::data
