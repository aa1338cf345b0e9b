#pragma once
// The safetensors file format (Hugging Face), written and read without the
// reference library:
//
//   [8 bytes]  N, little-endian u64: length of the header
//   [N bytes]  UTF-8 JSON object, starting with '{', padded with spaces
//              (0x20) so that N is a multiple of 8:
//                { "__metadata__": {"key": "value", ...},          (optional,
//                  "name": {"dtype": "F32", "shape": [2, 3],        strings only)
//                           "data_offsets": [begin, end]}, ... }
//   [rest]     the byte buffer; [begin, end) is relative to its start.
//
// Rules enforced on read (the reference implementation's): every tensor's
// end - begin equals numel * element size; sorted by offset the tensors tile
// the buffer exactly (no overlaps, no holes) and the last one ends at the end
// of the file; no duplicate names; metadata values are strings. Data is
// little-endian, row-major, densely packed.
//
// The writer lays tensors out in the order given, "__metadata__" first in
// the header. Reading seeks to each tensor (pread) rather than loading the
// whole file.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/tensor.h"

namespace sdp::checkpoint {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // CPU, contiguous
};

// The writer records each tensor's CRC-32C (checksum.h) in the metadata as
// "<prefix><tensor name>": "<8 hex digits>"; read_into verifies it where
// present (sdp::PermanentError naming the file and tensor on a mismatch).
inline constexpr std::string_view kChecksumKeyPrefix = "sdp.crc32c.";

// "F32", "F64", "BF16", "I32", "U16".
std::string_view safetensors_dtype(DType dtype);

// Writes `tensors` (raw bytes, in the order given) and `metadata` to `path`
// through write_file_atomically. Throws sdp::Error for duplicate or empty
// names, the reserved name "__metadata__", non-CPU or non-contiguous tensors.
void save_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsTensorInfo {
  DType dtype;
  Shape shape;
  uint64_t nbytes;
};

class SafetensorsFile {
 public:
  SafetensorsFile() = default;
  explicit SafetensorsFile(const std::filesystem::path& path) { open(path); }
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Opens and validates the header and layout (no tensor data is read).
  // Tensors of a dtype sdp does not support (F16, I64, U8, ...) do not fail
  // open(); info() and read_into() reject them by name.
  void open(const std::filesystem::path& path);
  void close();
  bool is_open() const { return fd_ >= 0; }
  const std::filesystem::path& path() const { return path_; }

  // Tensor names in file (offset) order; empty tensors at the same offset
  // in name order.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // The dtype string as written in the header ("F32", "F16", ...).
  const std::string& dtype_string(const std::string& name) const;
  SafetensorsTensorInfo info(const std::string& name) const;
  // The metadata its writer's caller gave, without the checksums.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Copies tensor `name` into `dst`, which must be a contiguous CPU tensor of
  // the same dtype and shape (sdp::Error names the tensor, what `dst`
  // expected and what the file holds). A checksum recorded for the tensor
  // is verified.
  void read_into(const std::string& name, const Tensor& dst) const;

 private:
  struct Entry {
    std::string name;
    std::string dtype_string;
    std::optional<DType> dtype;  // empty: a valid safetensors dtype sdp does not support
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // relative to the data buffer
  };
  const Entry& entry(const std::string& name) const;

  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // file offset of the byte buffer (8 + N)
  std::vector<Entry> entries_;  // sorted by offset
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::string> checksums_;  // tensor name -> CRC-32C, 8 hex digits
};

}  // namespace sdp::checkpoint
