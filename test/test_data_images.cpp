// CIFAR binary reading and the image stream: exact pixels and labels,
// normalization, crop/flip, determinism, rank sharding, state/restore across
// world sizes, epoch reshuffles, and one clear error per kind of bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/cifar_binary.h"
#include "engine/data/image_augment.h"
#include "test/test_cifar_writer.h"
#include "test/test_support.h"

using sdp::data::CifarImageSource;
using sdp::data::CifarKind;
using sdp::data::CropFlip;
using sdp::data::ImageShape;
using sdp::data::ImageSource;
using sdp::data::ImageSourceOptions;
using sdp::data::make_image_source;
using sdp::data::Split;
using sdp::data::StreamPart;
using sdp::testing::fake_cifar_label;
using sdp::testing::fake_cifar_pixel;
using sdp::testing::kFakeValId;
using sdp::testing::small_cifar_layout;
using sdp::testing::TempDir;
using sdp::testing::write_fake_cifar;

namespace {

constexpr int64_t kImage = 3 * 32 * 32;

struct Batch {
  std::vector<float> images;  // [batch, C, H, W]
  std::vector<int32_t> labels;  // [batch]
  bool operator==(const Batch&) const = default;
};

Batch next(ImageSource& source, int64_t batch) {
  Batch b{std::vector<float>(static_cast<size_t>(batch * source.image_shape().numel())),
          std::vector<int32_t>(static_cast<size_t>(batch))};
  source.next_batch(b.images.data(), b.labels.data(), batch);
  return b;
}

// Row `row` of a batch, as its own vector.
std::vector<float> row_of(const Batch& b, int64_t row, int64_t numel) {
  return {b.images.begin() + row * numel, b.images.begin() + (row + 1) * numel};
}

// Record `id` of the fake files, normalized: [3, 32, 32].
std::vector<float> normalized_record(CifarKind kind, int64_t id) {
  const auto& mean = kind == CifarKind::cifar10 ? sdp::data::kCifar10Mean : sdp::data::kCifar100Mean;
  const auto& std = kind == CifarKind::cifar10 ? sdp::data::kCifar10Std : sdp::data::kCifar100Std;
  std::vector<float> out(kImage);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < 32; ++y)
      for (int64_t x = 0; x < 32; ++x)
        out[static_cast<size_t>((c * 32 + y) * 32 + x)] = sdp::data::normalize_pixel(
            fake_cifar_pixel(id, c, y, x), mean[static_cast<size_t>(c)], std[static_cast<size_t>(c)]);
  return out;
}

// The record id whose normalized image is `image` (searching ids [0, n)).
int64_t find_record(CifarKind kind, const std::vector<float>& image, int64_t first, int64_t n) {
  for (int64_t id = first; id < first + n; ++id)
    if (normalized_record(kind, id) == image) return id;
  return -1;
}

// Interleaves rank batches: row i of rank r is row i * world + r of the result.
Batch interleave(const std::vector<Batch>& ranks, int64_t numel) {
  Batch all;
  const size_t rows = ranks[0].labels.size();
  for (size_t i = 0; i < rows; ++i)
    for (const Batch& r : ranks) {
      all.labels.push_back(r.labels[i]);
      const auto begin = r.images.begin() + static_cast<int64_t>(i) * numel;
      all.images.insert(all.images.end(), begin, begin + numel);
    }
  return all;
}

struct FakeCifarDir {
  explicit FakeCifarDir(CifarKind kind, int64_t train_records = 3, int64_t val_records = 4)
      : layout(small_cifar_layout(kind, train_records, val_records)) {
    write_fake_cifar(dir.path(), layout);
  }
  std::unique_ptr<CifarImageSource> open(uint64_t seed = 5, Split split = Split::train,
                                         StreamPart part = {}, ImageSourceOptions options = {}) const {
    return std::make_unique<CifarImageSource>(layout, dir.path().string(), seed, split, part,
                                              options);
  }
  sdp::data::CifarLayout layout;
  TempDir dir;
};

}  // namespace

TEST_CASE("images: cifar10 val reads every record exactly, normalized, in order", "[data][images]") {
  FakeCifarDir fake(CifarKind::cifar10, 3, 4);
  auto val = fake.open(5, Split::val);
  REQUIRE(val->size() == 4);
  REQUIRE(val->num_classes() == 10);
  REQUIRE(val->image_shape() == ImageShape{3, 32, 32});
  const Batch b = next(*val, 4);
  for (int64_t i = 0; i < 4; ++i) {
    INFO("val record " << i);
    REQUIRE(b.labels[static_cast<size_t>(i)] == fake_cifar_label(CifarKind::cifar10, kFakeValId + i));
    REQUIRE(row_of(b, i, kImage) == normalized_record(CifarKind::cifar10, kFakeValId + i));
  }
  // The formula on one pixel: channel 1 (green), y 2, x 5 of val record 1.
  const uint8_t raw = fake_cifar_pixel(kFakeValId + 1, 1, 2, 5);
  REQUIRE(b.images[static_cast<size_t>(kImage + (1 * 32 + 2) * 32 + 5)] ==
          Approx((raw / 255.0 - 0.4822) / 0.2435).margin(1e-6));
  // Val wraps to record 0 and never augments, whatever the spec says.
  const Batch again = next(*val, 1);
  REQUIRE(row_of(again, 0, kImage) == normalized_record(CifarKind::cifar10, kFakeValId));
  REQUIRE_FALSE(fake.open(5, Split::val, {}, {.augment = true})->augments());
  REQUIRE_THAT(val->describe(), Catch::Contains("cifar10") && Catch::Contains("val split: 4 images"));
}

TEST_CASE("images: cifar100 uses the fine label and the CIFAR-100 statistics", "[data][images]") {
  FakeCifarDir fake(CifarKind::cifar100, 12, 2);
  auto val = fake.open(1, Split::val);
  REQUIRE(val->num_classes() == 100);
  const Batch b = next(*val, 2);
  for (int64_t i = 0; i < 2; ++i) {
    REQUIRE(b.labels[static_cast<size_t>(i)] == (kFakeValId + i) % 100);
    REQUIRE(row_of(b, i, kImage) == normalized_record(CifarKind::cifar100, kFakeValId + i));
  }
  const uint8_t raw = fake_cifar_pixel(kFakeValId, 2, 31, 0);
  REQUIRE(b.images[static_cast<size_t>((2 * 32 + 31) * 32)] ==
          Approx((raw / 255.0 - 0.4409) / 0.2762).margin(1e-6));
  // Train, unaugmented: one epoch is every record once, in shuffled order.
  auto train = fake.open(1, Split::train, {}, {.augment = false});
  REQUIRE(train->size() == 12);
  const Batch epoch = next(*train, 12);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 12; ++i) {
    const int64_t id = find_record(CifarKind::cifar100, row_of(epoch, i, kImage), 0, 12);
    REQUIRE(id == train->image_at(i));
    REQUIRE(epoch.labels[static_cast<size_t>(i)] == id % 100);
    seen.insert(id);
  }
  REQUIRE(seen.size() == 12);
}

TEST_CASE("images: crop and flip shift and mirror with zero padding", "[data][images]") {
  // A hand example: 1 channel, 2x4, pad 1, crop offsets dy 0 (one row up),
  // dx 2 (one column left), then flipped.
  const std::vector<float> src = {1, 2, 3, 4,   //
                                  5, 6, 7, 8};
  const float fill = -9;
  std::vector<float> dst(8);
  sdp::data::apply_crop_flip(src.data(), {1, 2, 4}, 1, CropFlip{0, 2, false}, &fill, dst.data());
  REQUIRE(dst == std::vector<float>{-9, -9, -9, -9,  //
                                    2, 3, 4, -9});
  sdp::data::apply_crop_flip(src.data(), {1, 2, 4}, 1, CropFlip{0, 2, true}, &fill, dst.data());
  REQUIRE(dst == std::vector<float>{-9, -9, -9, -9,  //
                                    -9, 4, 3, 2});
  sdp::data::apply_crop_flip(src.data(), {1, 2, 4}, 1, CropFlip{1, 1, true}, &fill, dst.data());
  REQUIRE(dst == std::vector<float>{4, 3, 2, 1,  //
                                    8, 7, 6, 5});
  REQUIRE(sdp::data::crop_padding({3, 32, 32}) == 4);
  REQUIRE(sdp::data::crop_padding({3, 8, 8}) == 1);

  // In a source: each train image is its record, cropped and flipped by the
  // draw for (seed, epoch, image index), padded with normalized black.
  FakeCifarDir fake(CifarKind::cifar10, 2, 1);
  auto train = fake.open(11);
  REQUIRE(train->augments());
  const uint64_t key = sdp::data::augment_key(11, 0);
  const Batch b = next(*train, 10);
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t i = 0; i < 10; ++i) {
    const int64_t id = train->image_at(i);
    const CropFlip crop = sdp::data::draw_crop_flip(key, id, 4);
    REQUIRE(crop.dy >= 0);
    REQUIRE(crop.dy <= 8);
    REQUIRE(crop.dx >= 0);
    REQUIRE(crop.dx <= 8);
    offsets.insert({crop.dy, crop.dx});
    const std::vector<float> record = normalized_record(CifarKind::cifar10, id);
    for (int64_t c = 0; c < 3; ++c) {
      const auto cs = static_cast<size_t>(c);
      const float black = (0.0f - sdp::data::kCifar10Mean[cs]) / sdp::data::kCifar10Std[cs];
      for (int64_t y = 0; y < 32; ++y)
        for (int64_t x = 0; x < 32; ++x) {
          const int64_t sy = y + crop.dy - 4;
          const int64_t sx = (crop.flip ? 31 - x : x) + crop.dx - 4;
          const bool inside = sy >= 0 && sy < 32 && sx >= 0 && sx < 32;
          const float expected = inside ? record[static_cast<size_t>((c * 32 + sy) * 32 + sx)] : black;
          const float got = b.images[static_cast<size_t>(i * kImage + (c * 32 + y) * 32 + x)];
          if (got != expected) FAIL("image " << i << " c " << c << " y " << y << " x " << x);
        }
    }
    REQUIRE(b.labels[static_cast<size_t>(i)] == fake_cifar_label(CifarKind::cifar10, id));
  }
  REQUIRE(offsets.size() > 1);  // the draws vary
  // Epoch 1 draws again: image at position 10 (epoch 1) uses epoch 1's key.
  std::vector<float> expected(kImage);
  train->render(train->image_at(10), 1, expected.data());
  REQUIRE(row_of(next(*train, 1), 0, kImage) == expected);
}

TEST_CASE("images: same seed gives the same stream, another seed another", "[data][images]") {
  FakeCifarDir fake(CifarKind::cifar10, 4, 1);
  auto a = fake.open(3);
  auto b = fake.open(3);
  auto c = fake.open(4);
  for (int step = 0; step < 5; ++step) {
    const Batch ba = next(*a, 7);
    REQUIRE(ba == next(*b, 7));
    REQUIRE_FALSE(ba == next(*c, 7));
  }
}

TEST_CASE("images: ranks interleave to the one-process stream, with augmentation", "[data][images]") {
  FakeCifarDir fake(CifarKind::cifar10, 3, 4);  // 15 train images: batches cross epochs
  for (const bool augment : {false, true}) {
    INFO("augment " << augment);
    auto whole = fake.open(8, Split::train, {0, 1}, {.augment = augment});
    auto r0 = fake.open(8, Split::train, {0, 2}, {.augment = augment});
    auto r1 = fake.open(8, Split::train, {1, 2}, {.augment = augment});
    for (int step = 0; step < 6; ++step) {
      INFO("step " << step);
      const Batch expected = next(*whole, 6);
      REQUIRE(interleave({next(*r0, 3), next(*r1, 3)}, kImage) == expected);
    }
    REQUIRE(r0->state() == whole->state());
    REQUIRE(r1->state() == whole->state());
  }
}

TEST_CASE("images: state and restore resume bit-identically, across world sizes", "[data][images]") {
  FakeCifarDir fake(CifarKind::cifar10, 3, 4);
  auto run = fake.open(2);
  for (int step = 0; step < 4; ++step) next(*run, 4);  // position 16: epoch 1, index 1
  const nlohmann::json saved = run->state();
  REQUIRE(saved["epoch"] == 1);
  REQUIRE(saved["index"] == 1);
  const Batch b1 = next(*run, 4);
  const Batch b2 = next(*run, 4);

  auto resumed = fake.open(2);
  resumed->restore(saved);
  REQUIRE(resumed->state() == saved);
  REQUIRE(next(*resumed, 4) == b1);
  REQUIRE(next(*resumed, 4) == b2);

  // On two ranks with half the batch each.
  auto r0 = fake.open(2, Split::train, {0, 2});
  auto r1 = fake.open(2, Split::train, {1, 2});
  r0->restore(saved);
  r1->restore(saved);
  REQUIRE(interleave({next(*r0, 2), next(*r1, 2)}, kImage) == b1);
  REQUIRE(interleave({next(*r0, 2), next(*r1, 2)}, kImage) == b2);

  // A state from another source names the field that differs.
  auto other_seed = fake.open(9);
  REQUIRE_THROWS_WITH(other_seed->restore(saved), Catch::Contains("'identity'"));
  auto no_augment = fake.open(2, Split::train, {}, {.augment = false});
  REQUIRE_THROWS_WITH(no_augment->restore(saved), Catch::Contains("'identity'"));
  auto val = fake.open(2, Split::val);
  REQUIRE_THROWS_WITH(val->restore(saved), Catch::Contains("'identity'") || Catch::Contains("'split'"));
  nlohmann::json broken = saved;
  broken.erase("epoch");
  REQUIRE_THROWS_WITH(resumed->restore(broken), Catch::Contains("'epoch'"));
  broken = saved;
  broken["index"] = 15;
  REQUIRE_THROWS_WITH(resumed->restore(broken), Catch::Contains("'index' 15"));
  REQUIRE_THROWS_WITH(resumed->restore(nlohmann::json{{"kind", "synthetic-images"}}),
                      Catch::Contains("'kind'"));
}

TEST_CASE("images: each epoch is a new permutation covering every image once", "[data][images]") {
  FakeCifarDir fake(CifarKind::cifar10, 4, 1);  // 20 train images
  auto train = fake.open(6, Split::train, {}, {.augment = false});
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> ids;
    for (int step = 0; step < 4; ++step) {  // batches of 5
      const Batch b = next(*train, 5);
      for (int64_t i = 0; i < 5; ++i)
        ids.push_back(find_record(CifarKind::cifar10, row_of(b, i, kImage), 0, 20));
    }
    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < 20; ++i) REQUIRE(sorted[static_cast<size_t>(i)] == i);
    epochs.push_back(ids);
  }
  REQUIRE(epochs[0] != epochs[1]);
  REQUIRE(epochs[1] != epochs[2]);
  REQUIRE(sdp::data::epoch_permutation(20, 6, 1) ==
          std::vector<int32_t>(epochs[1].begin(), epochs[1].end()));
  REQUIRE(train->epoch() == 3);
  REQUIRE(train->index_in_epoch() == 0);
}

TEST_CASE("images: limit keeps the first images of each split", "[data][images]") {
  FakeCifarDir fake(CifarKind::cifar10, 3, 4);
  auto train = fake.open(1, Split::train, {}, {.augment = false, .limit = 5});
  REQUIRE(train->size() == 5);
  const Batch b = next(*train, 5);
  std::set<int64_t> ids;
  for (int64_t i = 0; i < 5; ++i) ids.insert(find_record(CifarKind::cifar10, row_of(b, i, kImage), 0, 15));
  REQUIRE(ids == std::set<int64_t>{0, 1, 2, 3, 4});
  // A split smaller than the limit keeps all of its images.
  REQUIRE(fake.open(1, Split::val, {}, {.limit = 100})->size() == 4);
}

TEST_CASE("images: batches do not depend on the thread count", "[data][images]") {
  FakeCifarDir fake(CifarKind::cifar10, 3, 1);
  auto one = fake.open(4);
  auto two = fake.open(4);
  const Batch serial = next(*one, 9);
  sdp::testing::ThreadCount threads(2);
  REQUIRE(next(*two, 9) == serial);
}

TEST_CASE("images: bad CIFAR directories and files are named in the error", "[data][images]") {
  TempDir dir;
  const std::string d = dir.path().string();
  REQUIRE_THROWS_WITH(make_image_source("cifar10:" + d + "/nope", 0),
                      Catch::Contains("'" + d + "/nope' does not exist") &&
                          Catch::Contains("data_batch_1.bin") && Catch::Contains("test_batch.bin"));
  REQUIRE_THROWS_WITH(make_image_source("cifar10:" + d, 0),
                      Catch::Contains("data_batch_1.bin' does not exist") &&
                          Catch::Contains("data_batch_5.bin"));
  REQUIRE_THROWS_WITH(make_image_source("cifar100:" + d, 0, Split::val),
                      Catch::Contains("test.bin' does not exist") && Catch::Contains("train.bin"));

  // The official layout wants 10000 records per file.
  write_fake_cifar(dir.path(), small_cifar_layout(CifarKind::cifar10, 3, 4));
  REQUIRE_THROWS_WITH(make_image_source("cifar10:" + d, 0),
                      Catch::Contains("data_batch_1.bin' holds 3 records (9219 bytes)") &&
                          Catch::Contains("expected 10000 records (30730000 bytes)"));

  // Truncated: not a whole number of records.
  const auto layout = small_cifar_layout(CifarKind::cifar10, 3, 4);
  std::filesystem::resize_file(dir / "data_batch_2.bin", 3 * 3073 - 100);
  REQUIRE_THROWS_WITH(CifarImageSource(layout, d, 0),
                      Catch::Contains("data_batch_2.bin' holds 9119 bytes, not a whole number of "
                                      "3073-byte records") &&
                          Catch::Contains("expected 3 records"));
  // A whole record short.
  std::filesystem::resize_file(dir / "data_batch_2.bin", 2 * 3073);
  REQUIRE_THROWS_WITH(CifarImageSource(layout, d, 0),
                      Catch::Contains("data_batch_2.bin' holds 2 records") &&
                          Catch::Contains("expected 3 records"));
  write_fake_cifar(dir.path(), layout);

  // Labels out of range name the file and the record.
  sdp::testing::patch_cifar_byte(dir / "data_batch_4.bin", CifarKind::cifar10, 2, 0, 10);
  REQUIRE_THROWS_WITH(CifarImageSource(layout, d, 0),
                      Catch::Contains("data_batch_4.bin': record 2 has label 10, outside [0, 10)"));
  REQUIRE_NOTHROW(CifarImageSource(layout, d, 0, Split::val));

  const auto layout100 = small_cifar_layout(CifarKind::cifar100, 5, 2);
  write_fake_cifar(dir.path(), layout100);
  sdp::testing::patch_cifar_byte(dir / "train.bin", CifarKind::cifar100, 3, 1, 100);
  REQUIRE_THROWS_WITH(CifarImageSource(layout100, d, 0),
                      Catch::Contains("train.bin': record 3 has label 100, outside [0, 100)"));
  sdp::testing::patch_cifar_byte(dir / "test.bin", CifarKind::cifar100, 1, 0, 20);
  REQUIRE_THROWS_WITH(CifarImageSource(layout100, d, 0, Split::val),
                      Catch::Contains("test.bin': record 1 has coarse label 20, outside [0, 20)"));
}

TEST_CASE("images: bad specs name the problem and list the valid forms", "[data][images]") {
  for (const char* spec : {"", "bogus", "cifar", "cifar10", "cifar10:", "cifar100:,augment=1",
                           "synthetic-images:", "synthetic-images:classes"}) {
    INFO(spec);
    REQUIRE_THROWS_WITH(make_image_source(spec, 0),
                        Catch::Contains("cifar10:DIR") && Catch::Contains("cifar100:DIR") &&
                            Catch::Contains("synthetic-images"));
  }
  REQUIRE_THROWS_WITH(make_image_source("cifar10:/x,shuffle=0", 0),
                      Catch::Contains("unknown cifar10 option 'shuffle'") &&
                          Catch::Contains("valid: augment, limit, seed"));
  REQUIRE_THROWS_WITH(make_image_source("synthetic-images:colour=1", 0),
                      Catch::Contains("unknown synthetic-images option 'colour'") &&
                          Catch::Contains("classes") && Catch::Contains("noise"));
  REQUIRE_THROWS_WITH(make_image_source("cifar10:/x,augment=2", 0),
                      Catch::Contains("augment='2' is not 0 or 1"));
  REQUIRE_THROWS_WITH(make_image_source("cifar10:/x,limit=0", 0),
                      Catch::Contains("limit='0' is not an integer >= 1"));
  REQUIRE_THROWS_WITH(make_image_source("synthetic-images:size=many", 0),
                      Catch::Contains("size='many' is not an integer >= 1"));
  REQUIRE_THROWS_WITH(make_image_source("synthetic-images:noise=-1", 0),
                      Catch::Contains("noise='-1' is not a number >= 0"));
  REQUIRE_THROWS_WITH(make_image_source("synthetic-images:seed=-4", 0),
                      Catch::Contains("seed='-4' is not a non-negative 64-bit integer"));
  REQUIRE_THROWS_WITH(make_image_source("synthetic-images:height=2", 0),
                      Catch::Contains("height=2 is out of range; valid: 4 .. 256"));
  REQUIRE_THROWS_WITH(make_image_source("synthetic-images:classes=1", 0),
                      Catch::Contains("classes='1' is not an integer >= 2"));
  REQUIRE_THROWS_WITH(make_image_source("synthetic-images", 0, Split::train, {2, 2}),
                      Catch::Contains("rank 2 of world 2"));

  REQUIRE(sdp::data::is_image_spec("synthetic-images"));
  REQUIRE(sdp::data::is_image_spec("synthetic-images:classes=4"));
  REQUIRE(sdp::data::is_image_spec("cifar10:/data"));
  REQUIRE(sdp::data::is_image_spec("cifar100:/data,limit=5"));
  REQUIRE_FALSE(sdp::data::is_image_spec("synthetic"));
  REQUIRE_FALSE(sdp::data::is_image_spec("synthetic:vocab=8"));
  REQUIRE_FALSE(sdp::data::is_image_spec("llmc:/data/*.bin"));
  REQUIRE_FALSE(sdp::data::is_image_spec("text:/cifar10"));
}
