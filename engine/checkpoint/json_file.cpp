#include "engine/checkpoint/json_file.h"

#include <cerrno>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "engine/checkpoint/atomic_file.h"
#include "engine/core/error.h"

namespace sdp::checkpoint {

void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& value) {
  std::string text = value.dump(2);
  text.push_back('\n');
  write_file_atomically(path, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  // A directory opens as a stream on Linux and fails only on reading, with
  // a message that names no file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("cannot read JSON file '", path.string(), "': it is a directory (expected a file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail_errno("cannot open JSON file", path, errno ? errno : ENOENT);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) detail::fail_errno("cannot read JSON file", path, errno ? errno : EIO);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() already says "parse error at line L, column C: ..."; add the
    // file and the byte offset.
    fail("invalid JSON in '", path.string(), "' (byte ", e.byte, "): ", e.what());
  } catch (const nlohmann::json::exception& e) {
    // Well-formed text the parser still refuses: a number beyond double's
    // range (out_of_range 406).
    fail("invalid JSON in '", path.string(), "': ", e.what());
  }
}

}  // namespace sdp::checkpoint
