#include "engine/data/byte_text.h"

#include <filesystem>

#include "engine/core/error.h"

namespace sdp::data {
namespace {
MappedFile open_text(const std::string& path) {
  if (!std::filesystem::exists(path)) fail("text data file '", path, "' does not exist");
  MappedFile file(path);
  if (file.size() == 0) fail("text data file '", path, "' is empty (0 bytes)");
  return file;
}
}  // namespace

ByteTextSource::ByteTextSource(const std::string& path, Split split, StreamPart part,
                               bool shuffle, uint64_t seed)
    : SequentialTokenSource("text", split, part, shuffle, seed), file_(open_text(path)) {
  const int64_t n = file_bytes();
  // The train part keeps at least one byte and val at least one whenever the
  // file has two; a one-byte file is all train (and too short for any window).
  int64_t cut = n - n / 20;
  if (cut == n && n >= 2) cut = n - 1;
  if (split == Split::train)
    set_range(0, cut);
  else
    set_range(cut, n);
}

void ByteTextSource::copy_tokens(int64_t abs_begin, int64_t count, int32_t* out) const {
  const uint8_t* p = file_.data() + abs_begin;
  for (int64_t i = 0; i < count; ++i) out[i] = p[i];
}

nlohmann::json ByteTextSource::identity() const {
  return {{"path", file_.path()}, {"bytes", file_bytes()}};
}

std::string ByteTextSource::error_name() const {
  return format("text source '", file_.path(), "' (", file_bytes(), " bytes)");
}

std::string ByteTextSource::describe() const {
  return format("text:", file_.path(), " (bytes as tokens, vocab 256; ", split_name(split()),
                " split = bytes [", range_begin(), ", ", range_end(), ") of ", file_bytes(),
                ", ", describe_order(), ")");
}

}  // namespace sdp::data
