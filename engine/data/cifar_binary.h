#pragma once
// The official CIFAR-10 / CIFAR-100 "binary version" files.
//   CIFAR-10:  data_batch_1.bin .. data_batch_5.bin (train, 10000 records
//              each), test_batch.bin (val, 10000); a record is 1 label byte
//              (0..9) then 3072 pixel bytes.
//   CIFAR-100: train.bin (50000 records), test.bin (10000); a record is a
//              coarse label byte (0..19), a fine label byte (0..99), then
//              3072 pixel bytes. The fine label is the class.
// Pixels are 32x32, channel-major: 1024 red bytes, 1024 green, 1024 blue,
// each plane row-major. Files are memory-mapped; every label is checked once
// when a split is opened.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/indexed_image_source.h"
#include "engine/data/mapped_file.h"

namespace sdp::data {

enum class CifarKind { cifar10, cifar100 };

struct CifarFile {
  std::string name;     // file name inside the data directory
  int64_t records = 0;  // how many records it must hold
};

// Which files make up each split and how many records each holds.
// cifar_layout() gives the official one; tests pass smaller counts.
struct CifarLayout {
  CifarKind kind = CifarKind::cifar10;
  std::vector<CifarFile> train;
  std::vector<CifarFile> val;
};

CifarLayout cifar_layout(CifarKind kind);
const char* cifar_name(CifarKind kind);        // "cifar10" / "cifar100"
int64_t cifar_num_classes(CifarKind kind);     // 10 / 100
int64_t cifar_label_bytes(CifarKind kind);     // 1 / 2 (coarse, fine)
inline constexpr int64_t kCifarSide = 32;
inline constexpr int64_t kCifarPixelBytes = 3 * kCifarSide * kCifarSide;  // 3072
inline int64_t cifar_record_bytes(CifarKind kind) {
  return cifar_label_bytes(kind) + kCifarPixelBytes;
}

// The mapped, validated records of one split.
class CifarSplitFiles {
 public:
  // Throws sdp::Error naming the directory or file: missing directory,
  // missing file (listing the files the split needs), a size that is not a
  // whole number of records or not the expected count, a label out of range
  // (naming the record).
  CifarSplitFiles(const CifarLayout& layout, const std::string& dir, Split split);

  int64_t size() const { return offsets_.back(); }
  int32_t label(int64_t index) const;
  // The 3072 pixel bytes of record `index` of the split: [3, 32, 32] uint8.
  const uint8_t* pixels(int64_t index) const;
  const std::vector<CifarFile>& files() const { return files_; }

 private:
  const uint8_t* record(int64_t index) const;

  CifarKind kind_;
  std::vector<CifarFile> files_;
  std::vector<MappedFile> mapped_;
  std::vector<int64_t> offsets_;  // [files + 1]: split index of each file's first record
};

class CifarImageSource : public IndexedImageSource {
 public:
  CifarImageSource(const CifarLayout& layout, const std::string& dir, uint64_t seed,
                   Split split = Split::train, StreamPart part = {},
                   ImageSourceOptions options = {});

  ImageShape image_shape() const override { return {3, kCifarSide, kCifarSide}; }
  int64_t num_classes() const override { return cifar_num_classes(kind_); }
  std::string describe() const override;
  const std::string& dir() const { return dir_; }

 protected:
  int32_t load(int64_t index, float* image) const override;
  const float* padding_fill() const override { return fill_.data(); }
  nlohmann::json identity() const override;
  std::string error_name() const override;

 private:
  CifarKind kind_;
  std::string dir_;
  CifarSplitFiles files_;
  std::array<float, 3> mean_{};
  std::array<float, 3> std_{};
  std::array<float, 3> fill_{};  // a black pixel, normalized
};

}  // namespace sdp::data
