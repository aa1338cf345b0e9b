#include "engine/data/cifar_binary.h"

#include <algorithm>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/data/image_augment.h"

namespace sdp::data {
namespace {

constexpr int64_t kCifar100CoarseClasses = 20;

std::string file_list(const std::vector<CifarFile>& files) {
  std::string text;
  for (const CifarFile& f : files) text += (text.empty() ? "" : ", ") + f.name;
  return text;
}

std::string expected_files(const CifarLayout& layout) {
  return format(cifar_name(layout.kind), " expects ", file_list(layout.train), " (train) and ",
                file_list(layout.val), " (val): the binary version of the data set");
}

}  // namespace

const char* cifar_name(CifarKind kind) {
  return kind == CifarKind::cifar10 ? "cifar10" : "cifar100";
}
int64_t cifar_num_classes(CifarKind kind) { return kind == CifarKind::cifar10 ? 10 : 100; }
int64_t cifar_label_bytes(CifarKind kind) { return kind == CifarKind::cifar10 ? 1 : 2; }

CifarLayout cifar_layout(CifarKind kind) {
  CifarLayout layout;
  layout.kind = kind;
  if (kind == CifarKind::cifar10) {
    for (int i = 1; i <= 5; ++i) layout.train.push_back({format("data_batch_", i, ".bin"), 10000});
    layout.val.push_back({"test_batch.bin", 10000});
  } else {
    layout.train.push_back({"train.bin", 50000});
    layout.val.push_back({"test.bin", 10000});
  }
  return layout;
}

CifarSplitFiles::CifarSplitFiles(const CifarLayout& layout, const std::string& dir, Split split)
    : kind_(layout.kind), files_(split == Split::train ? layout.train : layout.val) {
  namespace fs = std::filesystem;
  const char* name = cifar_name(kind_);
  if (!fs::is_directory(dir))
    fail(name, " data directory '", dir, "' does not exist or is not a directory; ",
         expected_files(layout));
  const int64_t record_bytes = cifar_record_bytes(kind_);
  offsets_.push_back(0);
  for (const CifarFile& file : files_) {
    const std::string path = (fs::path(dir) / file.name).string();
    if (!fs::exists(path))
      fail(name, " file '", path, "' does not exist; the ", split_name(split), " split needs ",
           file_list(files_), " in '", dir, "' (", expected_files(layout), ")");
    MappedFile mapped(path);
    const auto bytes = static_cast<int64_t>(mapped.size());
    const int64_t expected_bytes = file.records * record_bytes;
    if (bytes % record_bytes != 0)
      fail(name, " file '", path, "' holds ", bytes, " bytes, not a whole number of ",
           record_bytes, "-byte records (", bytes / record_bytes, " records and ",
           bytes % record_bytes, " bytes over); expected ", file.records, " records = ",
           expected_bytes, " bytes; is the file truncated?");
    if (bytes != expected_bytes)
      fail(name, " file '", path, "' holds ", bytes / record_bytes, " records (", bytes,
           " bytes); expected ", file.records, " records (", expected_bytes, " bytes)");
    const int64_t classes = cifar_num_classes(kind_);
    const uint8_t* p = mapped.data();
    for (int64_t r = 0; r < file.records; ++r, p += record_bytes) {
      if (kind_ == CifarKind::cifar100 && p[0] >= kCifar100CoarseClasses)
        fail(name, " file '", path, "': record ", r, " has coarse label ", int{p[0]},
             ", outside [0, ", kCifar100CoarseClasses, ")");
      const uint8_t label = p[cifar_label_bytes(kind_) - 1];
      if (label >= classes)
        fail(name, " file '", path, "': record ", r, " has label ", int{label}, ", outside [0, ",
             classes, ")");
    }
    mapped_.push_back(std::move(mapped));
    offsets_.push_back(offsets_.back() + file.records);
  }
}

const uint8_t* CifarSplitFiles::record(int64_t index) const {
  SDP_CHECK(index >= 0 && index < size(), "record ", index, " outside [0, ", size(), ")");
  const auto file =
      std::upper_bound(offsets_.begin(), offsets_.end(), index) - offsets_.begin() - 1;
  return mapped_[static_cast<size_t>(file)].data() +
         (index - offsets_[static_cast<size_t>(file)]) * cifar_record_bytes(kind_);
}

int32_t CifarSplitFiles::label(int64_t index) const {
  return record(index)[cifar_label_bytes(kind_) - 1];
}

const uint8_t* CifarSplitFiles::pixels(int64_t index) const {
  return record(index) + cifar_label_bytes(kind_);
}

CifarImageSource::CifarImageSource(const CifarLayout& layout, const std::string& dir,
                                   uint64_t seed, Split split, StreamPart part,
                                   ImageSourceOptions options)
    : IndexedImageSource(cifar_name(layout.kind), seed, split, part, options),
      kind_(layout.kind),
      dir_(dir),
      files_(layout, dir, split) {
  const bool ten = kind_ == CifarKind::cifar10;
  mean_ = ten ? kCifar10Mean : kCifar100Mean;
  std_ = ten ? kCifar10Std : kCifar100Std;
  for (size_t c = 0; c < 3; ++c) fill_[c] = normalize_pixel(0, mean_[c], std_[c]);
  set_available(files_.size());
}

int32_t CifarImageSource::load(int64_t index, float* image) const {
  normalize_rgb_planes(files_.pixels(index), kCifarSide * kCifarSide, mean_, std_, image);
  return files_.label(index);
}

nlohmann::json CifarImageSource::identity() const {
  // The files by name and size, not the directory: the same data moved to
  // another directory (another machine) resumes.
  nlohmann::json files = nlohmann::json::array();
  for (const CifarFile& f : files_.files()) files.push_back({f.name, f.records});
  return {{"files", files}};
}

std::string CifarImageSource::error_name() const {
  return format(cifar_name(kind_), " source '", dir_, "'");
}

std::string CifarImageSource::describe() const {
  return format(cifar_name(kind_), ": '", dir_, "' (", file_list(files_.files()),
                "), normalized by the ", kind_ == CifarKind::cifar10 ? "CIFAR-10" : "CIFAR-100",
                " channel mean and std; ", describe_stream());
}

}  // namespace sdp::data
