#include "engine/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/checksum.h"
#include "engine/core/error.h"

namespace fs = std::filesystem;

namespace sdp::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

// The reference implementation refuses headers above 100 MB; so do we.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeSpec {
  std::string_view name;
  uint64_t size;
  std::optional<DType> dtype;
};

// Every dtype of the safetensors format with a whole-byte element size.
constexpr DTypeSpec kDTypes[] = {
    {"F32", 4, DType::f32},   {"F64", 8, DType::f64},  {"BF16", 2, DType::bf16},
    {"I32", 4, DType::i32},   {"U16", 2, DType::u16},  {"F16", 2, std::nullopt},
    {"I64", 8, std::nullopt}, {"U64", 8, std::nullopt}, {"U32", 4, std::nullopt},
    {"I16", 2, std::nullopt}, {"I8", 1, std::nullopt},  {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
    {"F8_E8M0", 1, std::nullopt}, {"C64", 8, std::nullopt},
};
constexpr const char* kSupported = "F32, F64, BF16, I32, U16";

const DTypeSpec* find_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

std::string shape_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

void pread_all(int fd, void* dst, uint64_t n, uint64_t offset, const fs::path& path,
               const std::string& what) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min<uint64_t>(n, uint64_t{1} << 30),
                              static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      detail::fail_errno("cannot read " + what + " from", path, errno);
    }
    if (r == 0) fail("unexpected end of file in '", path.string(), "' while reading ", what);
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

}  // namespace

std::string_view safetensors_dtype(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  fail("no safetensors dtype for ", dtype_name(dtype));
}

// ---------------------------------------------------------------------------
// Writer

void save_safetensors(const fs::path& path, std::span<const NamedTensor> tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  // Every tensor's checksum goes into the metadata (strings, as the format
  // requires; readers that do not know the keys, transformers included,
  // ignore them).
  // (The object is filled after the tensors' entries: a reference into an
  // ordered_json does not survive later insertions.)
  header["__metadata__"] = nlohmann::ordered_json::object();
  std::vector<std::pair<std::string, std::string>> meta(metadata.begin(), metadata.end());
  for (const auto& [key, value] : metadata)
    if (key.rfind(kChecksumKeyPrefix, 0) == 0)
      fail("save_safetensors '", path.string(), "': metadata key '", key,
           "' is reserved for the tensors' checksums");
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::string where = format("save_safetensors '", path.string(), "': tensor '", name, "'");
    if (name.empty()) fail("save_safetensors '", path.string(), "': empty tensor name");
    if (name == "__metadata__") fail(where, ": the name is reserved for the metadata");
    if (!seen.insert(name).second) fail(where, ": duplicate tensor name");
    if (t.device() != Device::cpu) fail(where, " is on ", device_name(t.device()), ", not cpu");
    if (!t.is_contiguous()) fail(where, " is not contiguous: ", t.describe());
    if (t.bytes() > 0 && t.raw() == nullptr) fail(where, " has no storage");
    const uint64_t n = t.bytes();
    header[name] = {{"dtype", std::string(safetensors_dtype(t.dtype()))},
                    {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
                    {"data_offsets", {offset, offset + n}}};
    meta.emplace_back(std::string(kChecksumKeyPrefix) + name, crc32c_hex(crc32c(t.raw(), n)));
    offset += n;
  }
  nlohmann::ordered_json& meta_json = header["__metadata__"];
  for (auto& [key, value] : meta) meta_json[key] = std::move(value);

  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // e.g. a name that is not valid UTF-8
    fail("save_safetensors '", path.string(), "': cannot encode header: ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  write_file_atomically(path, [&](std::ostream& os) {
    os.write(reinterpret_cast<const char*>(len), 8);
    os.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& nt : tensors)
      os.write(static_cast<const char*>(nt.tensor.raw()),
               static_cast<std::streamsize>(nt.tensor.bytes()));
  });
}

// ---------------------------------------------------------------------------
// Reader

SafetensorsFile::~SafetensorsFile() { close(); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      entries_(std::move(other.entries_)),
      index_(std::move(other.index_)),
      metadata_(std::move(other.metadata_)),
      checksums_(std::move(other.checksums_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    entries_ = std::move(other.entries_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
    checksums_ = std::move(other.checksums_);
  }
  return *this;
}

void SafetensorsFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  entries_.clear();
  index_.clear();
  metadata_.clear();
  checksums_.clear();
  data_start_ = 0;
}

void SafetensorsFile::open(const fs::path& path) {
  close();
  path_ = path;
  const std::string file = format("'", path.string(), "'");
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) detail::fail_errno("cannot open safetensors file", path, errno);
  fd_ = fd;
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) detail::fail_errno("cannot stat", path, errno);
    const uint64_t file_size = static_cast<uint64_t>(st.st_size);
    if (file_size < 8)
      fail("safetensors file ", file, " is truncated: ", file_size,
           " bytes, shorter than the 8-byte header length");

    unsigned char len[8];
    pread_all(fd_, len, 8, 0, path, "the header length");
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
    if (n > file_size - 8)
      fail("safetensors file ", file, ": header length ", n, " exceeds the file size (", file_size,
           " bytes; truncated or not a safetensors file)");
    if (n > kMaxHeaderBytes)
      fail("safetensors file ", file, ": header length ", n, " exceeds the limit of ",
           kMaxHeaderBytes, " bytes");
    std::string text(n, '\0');
    pread_all(fd_, text.data(), n, 8, path, "the header");
    if (text.empty() || text[0] != '{')
      fail("safetensors file ", file, ": header does not start with '{' (not a safetensors file?)");

    // Parse, refusing duplicate top-level keys (plain json would keep the last).
    std::string duplicate;
    std::set<std::string> keys;
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(
          text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
            if (event == nlohmann::json::parse_event_t::key && depth == 1 && duplicate.empty() &&
                !keys.insert(parsed.get<std::string>()).second)
              duplicate = parsed.get<std::string>();
            return true;
          });
    } catch (const nlohmann::json::exception& e) {  // syntax, or a number beyond double's range
      fail("safetensors file ", file, ": invalid JSON header: ", e.what());
    }
    if (!duplicate.empty())
      fail("safetensors file ", file, ": duplicate tensor name '", duplicate, "' in the header");
    if (!header.is_object())
      fail("safetensors file ", file, ": header is a JSON ", header.type_name(), ", not an object");

    for (auto& [key, value] : header.items()) {
      if (key == "__metadata__") {
        if (!value.is_object())
          fail("safetensors file ", file, ": __metadata__ is a ", value.type_name(),
               ", not an object of strings");
        for (auto& [mk, mv] : value.items()) {
          if (!mv.is_string())
            fail("safetensors file ", file, ": __metadata__ value of '", mk, "' is a ",
                 mv.type_name(), "; metadata values must be strings");
          // The writer's checksums are kept apart from the caller's metadata.
          if (mk.rfind(kChecksumKeyPrefix, 0) == 0)
            checksums_[mk.substr(kChecksumKeyPrefix.size())] = mv.get<std::string>();
          else
            metadata_[mk] = mv.get<std::string>();
        }
        continue;
      }
      const std::string where = format("safetensors file ", file, ": tensor '", key, "'");
      if (!value.is_object()) fail(where, ": entry is a ", value.type_name(), ", not an object");
      Entry e;
      e.name = key;
      const auto dt = value.find("dtype");
      if (dt == value.end() || !dt->is_string()) fail(where, ": missing or non-string \"dtype\"");
      e.dtype_string = dt->get<std::string>();
      const DTypeSpec* spec = find_dtype(e.dtype_string);
      if (!spec)
        fail(where, ": unknown dtype '", e.dtype_string, "' (supported: ", kSupported, ")");
      e.dtype = spec->dtype;

      const auto sh = value.find("shape");
      if (sh == value.end() || !sh->is_array()) fail(where, ": missing or non-array \"shape\"");
      uint64_t numel = 1;
      // The product of the non-zero dims bounds every contiguous stride: it
      // must fit int64 even where a zero dim makes the tensor empty.
      uint64_t strides_bound = 1;
      for (const auto& d : *sh) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
          fail(where, ": shape ", sh->dump(), " has an entry that is not a non-negative integer");
        const uint64_t dim = d.get<uint64_t>();
        if (dim != 0 && strides_bound > uint64_t(INT64_MAX) / dim)
          fail(where, ": shape ", sh->dump(), " overflows");
        if (dim != 0) strides_bound *= dim;
        numel *= dim;
        e.shape.push_back(static_cast<int64_t>(dim));
      }
      if (numel != 0 && numel > UINT64_MAX / spec->size)
        fail(where, ": shape ", sh->dump(), " overflows");
      const uint64_t nbytes = numel * spec->size;

      const auto off = value.find("data_offsets");
      if (off == value.end() || !off->is_array() || off->size() != 2 ||
          !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
        fail(where, ": \"data_offsets\" must be [begin, end] with non-negative integers");
      e.begin = (*off)[0].get<uint64_t>();
      e.end = (*off)[1].get<uint64_t>();
      const uint64_t buffer = file_size - 8 - n;
      if (e.end < e.begin)
        fail(where, ": data_offsets [", e.begin, ", ", e.end, "] end before they begin");
      if (e.end > buffer)
        fail(where, ": data_offsets [", e.begin, ", ", e.end, "] lie outside the data buffer of ",
             buffer, " bytes (file truncated?)");
      if (e.end - e.begin != nbytes)
        fail(where, ": data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin,
             " bytes, but dtype ", e.dtype_string, " and shape ", shape_str(e.shape), " need ",
             nbytes);
      entries_.push_back(std::move(e));
    }

    // The tensors must tile the buffer exactly. (Entries arrive sorted by
    // name, so empty tensors sharing an offset stay in name order.)
    std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
    });
    const uint64_t buffer = file_size - 8 - n;
    uint64_t cursor = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (e.begin < cursor)
        fail("safetensors file ", file, ": tensor '", e.name, "' (data_offsets [", e.begin, ", ",
             e.end, "]) overlaps tensor '", entries_[i - 1].name, "' (data_offsets [",
             entries_[i - 1].begin, ", ", entries_[i - 1].end, "])");
      if (e.begin > cursor)
        fail("safetensors file ", file, ": hole of ", e.begin - cursor, " bytes in the data buffer",
             " before tensor '", e.name, "' (offset ", cursor, " to ", e.begin, ")");
      cursor = e.end;
      index_[e.name] = i;
    }
    if (cursor != buffer)
      fail("safetensors file ", file, ": ", buffer - cursor,
           " trailing bytes of the data buffer belong to no tensor (tensors end at ", cursor,
           ", buffer is ", buffer, " bytes)");
    data_start_ = 8 + n;
  } catch (...) {
    close();
    throw;
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  SDP_CHECK(is_open(), "SafetensorsFile: no file is open");
  const auto it = index_.find(name);
  if (it == index_.end())
    fail("no tensor '", name, "' in safetensors file '", path_.string(), "' (it holds ",
         entries_.size(), " tensors)");
  return entries_[it->second];
}

const std::string& SafetensorsFile::dtype_string(const std::string& name) const {
  return entry(name).dtype_string;
}

SafetensorsTensorInfo SafetensorsFile::info(const std::string& name) const {
  const Entry& e = entry(name);
  if (!e.dtype)
    fail("tensor '", name, "' in '", path_.string(), "': unsupported dtype ", e.dtype_string,
         " (supported: ", kSupported, ")");
  if (e.shape.size() > static_cast<size_t>(kMaxDims))
    fail("tensor '", name, "' in '", path_.string(), "' has ", e.shape.size(),
         " dimensions; sdp tensors have at most ", kMaxDims);
  return {*e.dtype, Shape(e.shape.begin(), e.shape.end()), e.end - e.begin};
}

void SafetensorsFile::read_into(const std::string& name, const Tensor& dst) const {
  const SafetensorsTensorInfo in_file = info(name);
  const Entry& e = entry(name);
  const std::string where = format("reading tensor '", name, "' from '", path_.string(), "'");
  if (dst.device() != Device::cpu)
    fail(where, ": destination is on ", device_name(dst.device()), ", expected cpu");
  if (!dst.is_contiguous()) fail(where, ": destination is not contiguous: ", dst.describe());
  if (dst.dtype() != in_file.dtype)
    fail(where, ": dtype mismatch: expected ", safetensors_dtype(dst.dtype()), " (",
         dtype_name(dst.dtype()), "), found ", e.dtype_string, " in the file");
  if (dst.shape() != in_file.shape)
    fail(where, ": shape mismatch: expected ", dst.shape().str(), ", found ",
         in_file.shape.str(), " in the file");
  if (in_file.nbytes == 0) return;
  pread_all(fd_, dst.raw(), in_file.nbytes, data_start_ + e.begin, path_,
            format("tensor '", name, "'"));
  // Files written before checksums were recorded have none and load as
  // they always did; a recorded one must match.
  const auto recorded = checksums_.find(name);
  if (recorded == checksums_.end()) return;
  const std::string found = crc32c_hex(crc32c(dst.raw(), in_file.nbytes));
  if (found != recorded->second)
    throw PermanentError(format(
        "corrupted checkpoint file '", path_.string(), "': tensor '", name, "' has CRC-32C ",
        found, ", but the file's header records ", recorded->second,
        " (the file changed after it was written; restore it or resume from another checkpoint)"));
}

}  // namespace sdp::checkpoint
