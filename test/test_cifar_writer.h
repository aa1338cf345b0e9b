#pragma once
// Fake CIFAR-10/100 binary files for the image tests: the official file
// names with a few records each, whose bytes are a known function of the
// record, so a test can check every pixel and label it reads back.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/data/cifar_binary.h"
#include "test/test_temp_dir.h"

namespace sdp::testing {

// Record ids: train record i of the split is id i; val record i is id
// kFakeValId + i, so the two splits hold different images.
inline constexpr int64_t kFakeValId = 1000;

inline uint8_t fake_cifar_pixel(int64_t id, int64_t c, int64_t y, int64_t x) {
  return static_cast<uint8_t>((id * 37 + c * 11 + y * 7 + x * 3) % 256);
}
inline uint8_t fake_cifar_label(data::CifarKind kind, int64_t id) {
  return static_cast<uint8_t>(id % data::cifar_num_classes(kind));
}
inline uint8_t fake_cifar_coarse_label(int64_t id) { return static_cast<uint8_t>(id % 20); }

// The official layout with `train_records` per train file and `val_records`
// in the val file.
inline data::CifarLayout small_cifar_layout(data::CifarKind kind, int64_t train_records,
                                            int64_t val_records) {
  data::CifarLayout layout = data::cifar_layout(kind);
  for (data::CifarFile& f : layout.train) f.records = train_records;
  for (data::CifarFile& f : layout.val) f.records = val_records;
  return layout;
}

// The bytes of records first_id .. first_id + count - 1.
inline std::vector<uint8_t> fake_cifar_records(data::CifarKind kind, int64_t first_id,
                                               int64_t count) {
  std::vector<uint8_t> bytes;
  for (int64_t id = first_id; id < first_id + count; ++id) {
    if (kind == data::CifarKind::cifar100) bytes.push_back(fake_cifar_coarse_label(id));
    bytes.push_back(fake_cifar_label(kind, id));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 32; ++y)
        for (int64_t x = 0; x < 32; ++x) bytes.push_back(fake_cifar_pixel(id, c, y, x));
  }
  return bytes;
}

// Writes every file of `layout` into dir.
inline void write_fake_cifar(const std::filesystem::path& dir, const data::CifarLayout& layout) {
  int64_t id = 0;
  for (const data::CifarFile& f : layout.train) {
    write_bytes(dir / f.name, fake_cifar_records(layout.kind, id, f.records));
    id += f.records;
  }
  id = kFakeValId;
  for (const data::CifarFile& f : layout.val) {
    write_bytes(dir / f.name, fake_cifar_records(layout.kind, id, f.records));
    id += f.records;
  }
}

// Overwrites byte `offset` of record `record` of the file at `path`.
inline void patch_cifar_byte(const std::filesystem::path& path, data::CifarKind kind,
                             int64_t record, int64_t offset, uint8_t value) {
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  file.seekp(record * data::cifar_record_bytes(kind) + offset);
  file.put(static_cast<char>(value));
}

}  // namespace sdp::testing
