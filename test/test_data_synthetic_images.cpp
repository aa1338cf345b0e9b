// The synthetic image set: deterministic, balanced, normalized, separable by
// a shift-invariant matched filter, sharded and resumed like every source.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/image_augment.h"
#include "engine/data/synthetic_images.h"

using sdp::data::ImageShape;
using sdp::data::ImageSource;
using sdp::data::make_image_source;
using sdp::data::Split;
using sdp::data::StreamPart;
using sdp::data::SyntheticImages;
using sdp::data::SyntheticImagesConfig;

namespace {

struct Batch {
  std::vector<float> images;    // [batch, C, H, W]
  std::vector<int32_t> labels;  // [batch]
  bool operator==(const Batch&) const = default;
};

Batch next(ImageSource& source, int64_t batch) {
  Batch b{std::vector<float>(static_cast<size_t>(batch * source.image_shape().numel())),
          std::vector<int32_t>(static_cast<size_t>(batch))};
  source.next_batch(b.images.data(), b.labels.data(), batch);
  return b;
}

SyntheticImages& as_synthetic(ImageSource& source) {
  auto* s = dynamic_cast<SyntheticImages*>(&source);
  REQUIRE(s != nullptr);
  return *s;
}

// The class whose prototype, at its best circular shift, correlates most
// with the image: a classifier that knows the generator (shifts included).
int64_t nearest_prototype(const SyntheticImages& source, const float* image) {
  const ImageShape s = source.image_shape();
  int64_t best_class = -1;
  double best = -1e300;
  for (int64_t k = 0; k < source.num_classes(); ++k) {
    const float* proto = source.prototype(k);
    for (int64_t dy = 0; dy < s.height; ++dy)
      for (int64_t dx = 0; dx < s.width; ++dx) {
        double dot = 0.0;
        for (int64_t c = 0; c < s.channels; ++c)
          for (int64_t y = 0; y < s.height; ++y)
            for (int64_t x = 0; x < s.width; ++x)
              dot += image[(c * s.height + y) * s.width + x] *
                     proto[(c * s.height + (y - dy + s.height) % s.height) * s.width +
                           (x - dx + s.width) % s.width];
        if (dot > best) {
          best = dot;
          best_class = k;
        }
      }
  }
  return best_class;
}

double accuracy(SyntheticImages& source, int64_t n) {
  const Batch b = next(source, n);
  const int64_t numel = source.image_shape().numel();
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i)
    right += nearest_prototype(source, b.images.data() + i * numel) == b.labels[static_cast<size_t>(i)];
  return static_cast<double>(right) / static_cast<double>(n);
}

}  // namespace

TEST_CASE("synthetic images: defaults, options and shape", "[data][images]") {
  auto train = make_image_source("synthetic-images", 1);
  REQUIRE(train->image_shape() == ImageShape{3, 32, 32});
  REQUIRE(train->num_classes() == 10);
  REQUIRE(train->size() == 50000);
  REQUIRE(make_image_source("synthetic-images", 1, Split::val)->size() == 10000);
  REQUIRE(as_synthetic(*train).noise_std() == 3.0);
  REQUIRE_THAT(train->describe(), Catch::Contains("synthetic-images") &&
                                      Catch::Contains("shuffled each epoch (seed 1)") &&
                                      Catch::Contains("random crop (pad 4)"));

  auto tiny = make_image_source(
      "synthetic-images:classes=4,size=40,val_size=8,height=8,width=12,channels=1,limit=20", 1);
  REQUIRE(tiny->image_shape() == ImageShape{1, 8, 12});
  REQUIRE(tiny->num_classes() == 4);
  REQUIRE(tiny->size() == 20);
  REQUIRE(as_synthetic(*tiny).noise_std() == Approx(3.0 * std::sqrt(96.0 / 1024.0)));
  REQUIRE(as_synthetic(*make_image_source("synthetic-images:noise=0.5", 1)).noise_std() == 0.5);
  const Batch b = next(*tiny, 3);
  REQUIRE(b.images.size() == 3 * 96);
}

TEST_CASE("synthetic images: deterministic; seeds and data sets differ", "[data][images]") {
  const std::string spec = "synthetic-images:size=40,val_size=20,height=16,width=16";
  auto a = make_image_source(spec, 3);
  auto b = make_image_source(spec, 3);
  auto c = make_image_source(spec, 4);
  auto d = make_image_source(spec + ",seed=3", 99);  // the spec's seed wins
  for (int step = 0; step < 4; ++step) {
    const Batch ba = next(*a, 12);
    REQUIRE(ba == next(*b, 12));
    REQUIRE(ba == next(*d, 12));
    REQUIRE_FALSE(ba == next(*c, 12));
  }
  // The run seed only orders and augments: val images are the same for any
  // seed; another data set has other images.
  const Batch val = next(*make_image_source(spec, 3, Split::val), 5);
  REQUIRE(val == next(*make_image_source(spec, 4, Split::val), 5));
  REQUIRE_FALSE(val == next(*make_image_source(spec + ",dataset=2", 3, Split::val), 5));
  // Train and val draw from independent streams.
  auto unaugmented = make_image_source(spec + ",augment=0", 3);
  std::vector<float> train0(16 * 16 * 3);
  as_synthetic(*unaugmented).render(0, 0, train0.data());
  REQUIRE_FALSE(std::vector<float>(val.images.begin(), val.images.begin() + 768) == train0);
}

TEST_CASE("synthetic images: labels are balanced; val is in index order", "[data][images]") {
  auto train = make_image_source("synthetic-images:size=100,height=8,width=8", 2);
  const Batch epoch = next(*train, 100);
  std::vector<int> count(10, 0);
  for (int32_t label : epoch.labels) ++count[static_cast<size_t>(label)];
  REQUIRE(count == std::vector<int>(10, 10));
  const Batch val = next(*make_image_source("synthetic-images:height=8,width=8", 2, Split::val), 23);
  for (size_t i = 0; i < val.labels.size(); ++i) REQUIRE(val.labels[i] == static_cast<int32_t>(i % 10));
}

TEST_CASE("synthetic images: channels have mean 0 and std 1", "[data][images]") {
  auto val = make_image_source("synthetic-images", 1, Split::val);
  const int64_t n = 400;
  const Batch b = next(*val, n);
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0.0;
    double squares = 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < 1024; ++p) {
        const double v = b.images[static_cast<size_t>((i * 3 + c) * 1024 + p)];
        sum += v;
        squares += v * v;
      }
    const double mean = sum / static_cast<double>(n * 1024);
    const double std = std::sqrt(squares / static_cast<double>(n * 1024) - mean * mean);
    INFO("channel " << c << " mean " << mean << " std " << std);
    REQUIRE(std::abs(mean) < 0.05);
    REQUIRE(std::abs(std - 1.0) < 0.05);
  }
  // Prototypes are exactly normalized per channel.
  const auto& s = as_synthetic(*val);
  for (int64_t k = 0; k < 10; ++k)
    for (int64_t c = 0; c < 3; ++c) {
      double sum = 0.0;
      double squares = 0.0;
      for (int64_t p = 0; p < 1024; ++p) {
        const double v = s.prototype(k)[c * 1024 + p];
        sum += v;
        squares += v * v;
      }
      REQUIRE(std::abs(sum / 1024.0) < 1e-5);
      REQUIRE(squares / 1024.0 == Approx(1.0).epsilon(1e-5));
    }
}

TEST_CASE("synthetic images: classes are separable by the nearest shifted prototype", "[data][images]") {
  // Clean images (noise 0) are classified exactly; with the default noise
  // (1.5 at 16x16) far above chance (0.1).
  auto clean = make_image_source("synthetic-images:height=16,width=16,noise=0", 1, Split::val);
  REQUIRE(accuracy(as_synthetic(*clean), 30) == 1.0);
  auto noisy = make_image_source("synthetic-images:height=16,width=16", 1, Split::val);
  const double acc = accuracy(as_synthetic(*noisy), 60);
  INFO("accuracy " << acc);
  REQUIRE(acc > 0.6);
}

TEST_CASE("synthetic images: ranks interleave and resume like one process", "[data][images]") {
  const std::string spec = "synthetic-images:size=30,height=8,width=8";
  const int64_t numel = 3 * 8 * 8;
  auto whole = make_image_source(spec, 5, Split::train, {0, 1});
  for (int step = 0; step < 3; ++step) next(*whole, 8);  // crosses into epoch 1
  const nlohmann::json saved = whole->state();
  auto r0 = make_image_source(spec, 5, Split::train, {0, 2});
  auto r1 = make_image_source(spec, 5, Split::train, {1, 2});
  r0->restore(saved);
  r1->restore(saved);
  for (int step = 0; step < 4; ++step) {
    const Batch expected = next(*whole, 8);
    const Batch b0 = next(*r0, 4);
    const Batch b1 = next(*r1, 4);
    for (int64_t i = 0; i < 8; ++i) {
      const Batch& part = i % 2 == 0 ? b0 : b1;
      const auto row = static_cast<size_t>(i / 2);
      REQUIRE(part.labels[row] == expected.labels[static_cast<size_t>(i)]);
      REQUIRE(std::equal(part.images.begin() + static_cast<int64_t>(row) * numel,
                         part.images.begin() + static_cast<int64_t>(row + 1) * numel,
                         expected.images.begin() + i * numel));
    }
  }
  auto other = make_image_source("synthetic-images:size=30,height=8,width=8,noise=2", 5);
  REQUIRE_THROWS_WITH(other->restore(saved), Catch::Contains("'identity'"));
}

TEST_CASE("synthetic images: crops pad with black (-2 in every channel), not the mean", "[data][images]") {
  auto train = make_image_source("synthetic-images:size=50", 7);
  auto& s = as_synthetic(*train);
  const uint64_t key = sdp::data::augment_key(7, 0);
  std::vector<float> image(3 * 1024);
  int checked = 0;
  for (int64_t index = 0; index < 50; ++index) {
    const auto crop = sdp::data::draw_crop_flip(key, index, 4);
    if (crop.dy >= 4) continue;
    s.render(index, 0, image.data());
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 4 - crop.dy; ++y)
        for (int64_t x = 0; x < 32; ++x)
          REQUIRE(image[static_cast<size_t>((c * 32 + y) * 32 + x)] ==
                  sdp::data::SyntheticImages::kPaddingValue);
    ++checked;
  }
  REQUIRE(checked > 0);
}
