#pragma once
// A read-only memory map of a whole file. Shards may be far larger than the
// part a run touches, so mapping lets the OS page in only what is read.
#include <cstddef>
#include <cstdint>
#include <string>

namespace sdp::data {

class MappedFile {
 public:
  // Throws sdp::Error naming the file when it cannot be opened or mapped.
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }  // null when size() == 0
  size_t size() const { return size_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sdp::data
