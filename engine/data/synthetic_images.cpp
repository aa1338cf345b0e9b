#include "engine/data/synthetic_images.h"

#include <algorithm>
#include <cmath>

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

namespace sdp::data {
namespace {

constexpr int64_t kWavesPerClass = 4;
constexpr double kTwoPi = 6.283185307179586;
constexpr double kContrastLow = 0.5;
constexpr double kContrastHigh = 1.5;
// E[a^2] for a uniform on [low, high].
constexpr double kContrastSecondMoment =
    (kContrastHigh * kContrastHigh + kContrastHigh * kContrastLow + kContrastLow * kContrastLow) /
    3.0;

// Noise of mean 0 and variance 1 for pixel `at`: the sum of four 16-bit
// uniforms of one hash (Irwin-Hall, close to normal), centred and scaled.
// Cheaper than Box-Muller by a log, a sqrt and a cos per pixel, which made
// generation the bottleneck of a fast training step.
float pixel_noise(uint64_t key, uint64_t at) {
  const uint64_t bits = splitmix64(key ^ splitmix64(at));
  const uint64_t sum = (bits & 0xffff) + ((bits >> 16) & 0xffff) + ((bits >> 32) & 0xffff) +
                       (bits >> 48);
  // Each part is uniform on {0, .., 65535}: mean 32767.5, variance
  // (65536^2 - 1) / 12; the sum of four has variance (65536^2 - 1) / 3.
  constexpr double kMean = 4 * 32767.5;
  const double inv_std = 1.0 / std::sqrt((65536.0 * 65536.0 - 1.0) / 3.0);
  return static_cast<float>((static_cast<double>(sum) - kMean) * inv_std);
}

// Integer in [0, n - 1] from a uniform in (0, 1).
int64_t scaled(double u, int64_t n) {
  return std::min<int64_t>(static_cast<int64_t>(u * static_cast<double>(n)), n - 1);
}

// A circular shift in [0, extent): uniform over all positions when
// max_shift < 0 or covers them all, else uniform on [-max_shift, max_shift].
int64_t draw_shift(double u, int64_t max_shift, int64_t extent) {
  if (max_shift < 0 || 2 * max_shift + 1 >= extent) return scaled(u, extent);
  const int64_t s = scaled(u, 2 * max_shift + 1) - max_shift;
  return (s + extent) % extent;
}

void check_range(const char* key, int64_t value, int64_t low, int64_t high) {
  if (value < low || value > high)
    fail("synthetic-images ", key, "=", value, " is out of range; valid: ", low, " .. ", high);
}

}  // namespace

SyntheticImages::SyntheticImages(SyntheticImagesConfig config, uint64_t seed, Split split,
                                 StreamPart part, ImageSourceOptions options)
    : IndexedImageSource("synthetic-images", seed, split, part, options), config_(config) {
  const SyntheticImagesConfig& c = config_;
  check_range("classes", c.classes, 2, 1000);
  check_range("size", c.train_size, 1, int64_t{1} << 30);
  check_range("val_size", c.val_size, 1, int64_t{1} << 30);
  check_range("channels", c.shape.channels, 1, 16);
  check_range("height", c.shape.height, 4, 256);
  check_range("width", c.shape.width, 4, 256);
  if (!std::isfinite(c.noise))
    fail("synthetic-images noise=", c.noise, " is invalid; valid: a finite number >= 0");
  if (c.shift < -1)
    fail("synthetic-images shift=", c.shift, " is invalid; valid: >= 0, or -1 for all positions");
  black_.assign(static_cast<size_t>(c.shape.channels), kPaddingValue);
  build_prototypes();
  set_available(split == Split::train ? c.train_size : c.val_size);
}

int64_t SyntheticImages::max_frequency() const {
  return std::max<int64_t>(1, std::min(config_.shape.height, config_.shape.width) / 8);
}

double SyntheticImages::noise_std() const {
  if (config_.noise >= 0.0) return config_.noise;
  const auto area = static_cast<double>(config_.shape.height * config_.shape.width);
  return 3.0 * std::sqrt(area / 1024.0);
}

const float* SyntheticImages::prototype(int64_t k) const {
  SDP_CHECK(k >= 0 && k < config_.classes, "class ", k, " outside [0, ", config_.classes, ")");
  return prototypes_.data() + k * config_.shape.numel();
}

void SyntheticImages::build_prototypes() {
  const ImageShape s = config_.shape;
  const int64_t plane = s.height * s.width;
  const int64_t f_max = max_frequency();
  prototypes_.assign(static_cast<size_t>(config_.classes * s.numel()), 0.0f);
  std::vector<double> wave(static_cast<size_t>(plane));            // [H, W]
  std::vector<double> image(static_cast<size_t>(s.numel()), 0.0);  // [C, H, W]
  const uint64_t base = splitmix64(config_.dataset_seed ^ stable_hash("synthetic-images-classes"));
  for (int64_t k = 0; k < config_.classes; ++k) {
    const uint64_t key = splitmix64(base ^ static_cast<uint64_t>(k));
    uint64_t draw = 0;
    std::fill(image.begin(), image.end(), 0.0);
    for (int64_t j = 0; j < kWavesPerClass; ++j) {
      // fx in [0, F], fy in [-F, F], not both 0; fx = 0 only with fy > 0 so
      // that no two draws are the same wave up to sign.
      int64_t fx = 0;
      int64_t fy = 0;
      do {
        fx = scaled(counter_uniform(key, draw++), f_max + 1);
        fy = scaled(counter_uniform(key, draw++), 2 * f_max + 1) - f_max;
      } while (fx == 0 && fy <= 0);
      const double phase = kTwoPi * counter_uniform(key, draw++);
      for (int64_t y = 0; y < s.height; ++y)
        for (int64_t x = 0; x < s.width; ++x)
          wave[static_cast<size_t>(y * s.width + x)] =
              std::cos(kTwoPi * (static_cast<double>(fx * x) / static_cast<double>(s.width) +
                                 static_cast<double>(fy * y) / static_cast<double>(s.height)) +
                       phase);
      for (int64_t c = 0; c < s.channels; ++c) {
        const double weight = counter_normal(key, 1000 + draw++);
        double* out = image.data() + c * plane;
        for (int64_t p = 0; p < plane; ++p) out[p] += weight * wave[static_cast<size_t>(p)];
      }
    }
    float* proto = prototypes_.data() + k * s.numel();
    for (int64_t c = 0; c < s.channels; ++c) {
      const double* in = image.data() + c * plane;
      double mean = 0.0;
      for (int64_t p = 0; p < plane; ++p) mean += in[p];
      mean /= static_cast<double>(plane);
      double var = 0.0;
      for (int64_t p = 0; p < plane; ++p) var += (in[p] - mean) * (in[p] - mean);
      var /= static_cast<double>(plane);
      // Weights are normal draws, so a channel of all-zero weights has
      // probability 0; the floor only guards the division.
      const double inv_std = 1.0 / std::sqrt(std::max(var, 1e-12));
      for (int64_t p = 0; p < plane; ++p)
        proto[c * plane + p] = static_cast<float>((in[p] - mean) * inv_std);
    }
  }
}

int32_t SyntheticImages::load(int64_t index, float* image) const {
  const ImageShape s = config_.shape;
  const uint64_t split_key =
      splitmix64(config_.dataset_seed ^
                 stable_hash(split() == Split::train ? "synthetic-images-train"
                                                     : "synthetic-images-val"));
  const uint64_t key = splitmix64(split_key ^ static_cast<uint64_t>(index));
  const uint64_t noise_key = splitmix64(key ^ stable_hash("noise"));
  const auto label = static_cast<int32_t>(index % config_.classes);
  const int64_t dy = draw_shift(counter_uniform(key, 0), config_.shift, s.height);
  const int64_t dx = draw_shift(counter_uniform(key, 1), config_.shift, s.width);
  const double contrast =
      kContrastLow + (kContrastHigh - kContrastLow) * counter_uniform(key, 2);
  const double noise_std = this->noise_std();
  const double scale = 1.0 / std::sqrt(kContrastSecondMoment + noise_std * noise_std);
  const auto signal = static_cast<float>(scale * contrast);
  const auto noise = static_cast<float>(scale * noise_std);
  const float* proto = prototype(label);
  for (int64_t c = 0; c < s.channels; ++c) {
    for (int64_t y = 0; y < s.height; ++y) {
      const float* source_row = proto + (c * s.height + (y - dy + s.height) % s.height) * s.width;
      const int64_t row = (c * s.height + y) * s.width;
      for (int64_t x = 0; x < s.width; ++x) {
        const int64_t sx = x >= dx ? x - dx : x - dx + s.width;
        image[row + x] = signal * source_row[sx];
      }
      if (noise != 0.0f)
        for (int64_t x = 0; x < s.width; ++x)
          image[row + x] += noise * pixel_noise(noise_key, static_cast<uint64_t>(row + x));
    }
  }
  return label;
}

nlohmann::json SyntheticImages::identity() const {
  const SyntheticImagesConfig& c = config_;
  return {{"classes", c.classes},
          {"train_size", c.train_size},
          {"val_size", c.val_size},
          {"dataset", c.dataset_seed},
          {"noise", noise_std()},
          {"shift", c.shift},
          {"shape", {c.shape.channels, c.shape.height, c.shape.width}}};
}

std::string SyntheticImages::describe() const {
  const SyntheticImagesConfig& c = config_;
  return format("synthetic-images: ", c.classes, " classes of plane-wave textures (",
                kWavesPerClass, " waves, 1..", max_frequency(), " cycles), dataset ",
                c.dataset_seed, ", noise ", noise_std(), ", shift ",
                c.shift < 0 ? std::string("any") : format("+-", c.shift),
                ", contrast 0.5..1.5; generated normalized (mean 0, std 1); ",
                describe_stream());
}

}  // namespace sdp::data
