#include "engine/train/sharded_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/value_check.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/train/checkpoint_dir.h"
#include "models/common/parameter_pieces.h"
#include "models/common/tensor_staging.h"

namespace sdp {

namespace fs = std::filesystem;
namespace ck = checkpoint;

bool is_sharded_checkpoint(const fs::path& dir) { return fs::exists(dir / kShardIndexFileName); }

std::string rank_file_name(int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d-of-%05d.safetensors", rank, world);
  return name;
}

std::string_view chunk_part_name(ChunkPart part) {
  constexpr std::string_view names[] = {"values", "exp_avg", "exp_avg_sq", "buffer"};
  return names[static_cast<size_t>(part)];
}

namespace {

std::optional<ChunkPart> parse_chunk_part(std::string_view s) {
  for (ChunkPart p : {ChunkPart::values, ChunkPart::exp_avg, ChunkPart::exp_avg_sq,
                      ChunkPart::buffer})
    if (s == chunk_part_name(p)) return p;
  return std::nullopt;
}

nlohmann::json shape_json(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

// Prefix of a part's tensor names in a rank file (the optimizer file's names).
const char* tensor_prefix(ChunkPart part) {
  switch (part) {
    case ChunkPart::exp_avg: return "exp_avg.";
    case ChunkPart::exp_avg_sq: return "exp_avg_sq.";
    default: return "";
  }
}

}  // namespace

Shape ChunkInfo::piece_shape() const {
  Shape s = full_shape;
  if (s.ndim() > 0) s[axis] = length;
  return s;
}

nlohmann::json ChunkInfo::to_json() const {
  return {{"file", file},           {"tensor", tensor},  {"full_name", full_name},
          {"part", chunk_part_name(part)}, {"full_shape", shape_json(full_shape)},
          {"axis", axis},           {"start", start},    {"length", length},
          {"begin", begin},         {"end", end}};
}

// ---------------------------------------------------------------- writing

namespace {

// Adds the chunk of parameter (or buffer) `d`'s part covering its flat
// elements [begin, begin + t.numel()), t being those elements.
void add_chunk(std::vector<Chunk>& out, const ParamDecl& d, ChunkPart part, const Tensor& t,
               int64_t begin, DType state, const std::string& file, Allocator& scratch,
               std::vector<OwnedTensor>& keep_alive) {
  ChunkInfo info;
  info.file = file;
  info.tensor = tensor_prefix(part) + d.name;
  info.full_name = d.full_name;
  info.part = part;
  info.full_shape = d.full_shape;
  info.axis = d.piece_axis;
  info.start = d.piece_start;
  info.length = d.full_shape.ndim() > 0 ? d.shape[d.piece_axis] : 1;
  info.begin = begin;
  info.end = begin + t.numel();
  // A whole piece keeps its shape (the file then reads like the tensor it
  // is); a shard's slice of one is flat.
  const Shape shape = info.begin == 0 && info.end == d.shape.numel() ? d.shape
                                                                     : Shape{t.numel()};
  Tensor data = t.view(shape);
  if (data.device() != Device::cpu || data.dtype() != state) {
    SDP_CHECK(data.device() != Device::meta, "checkpoint: ", d.name,
              " is on the meta device and holds no values");
    keep_alive.emplace_back(scratch, shape, state, MemCategory::workspace);
    stage_copy(data, *keep_alive.back());
    data = *keep_alive.back();
  }
  out.push_back({std::move(info), data});
}

}  // namespace

std::vector<Chunk> rank_chunks(const TrainingState& training, const ChunkSelection& selection,
                               const std::string& file, Allocator& scratch,
                               std::vector<OwnedTensor>& keep_alive) {
  const ParameterSet& p = training.params();
  SDP_CHECK(selection.root.size() == static_cast<size_t>(p.group_count()), "rank_chunks: ",
            selection.root.size(), " root flags for ", p.group_count(), " storage groups");
  std::vector<Chunk> out;
  const DType state = p.state_dtype();
  auto add = [&](const ParamDecl& d, ChunkPart part, const Tensor& t, int64_t begin) {
    add_chunk(out, d, part, t, begin, state, file, scratch, keep_alive);
  };
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_materialized(id)) continue;
    const ParamDecl& d = p.decl(id);
    const int g = d.group;
    const bool root = selection.root[static_cast<size_t>(g)];
    if (d.buffer) {
      if (selection.buffers && root) add(d, ChunkPart::buffer, p.param(id), 0);
      continue;
    }
    const bool moments = selection.optimizer_state && training.keeps_training_state(g) &&
                         training.has_adam_state();
    if (training.group_shard(g).sharded()) {
      // Every owner writes the slice of the parameter in its shard.
      const TrainingState::ShardSlice sl = training.shard_slice(id);
      if (sl.length == 0) continue;
      auto slice = [&](const Tensor& shard) { return shard.narrow(0, sl.shard_begin, sl.length); };
      add(d, ChunkPart::values, slice(training.shard_values(g)), sl.param_begin);
      if (!moments) continue;
      add(d, ChunkPart::exp_avg, slice(training.shard_adam_m(g)), sl.param_begin);
      add(d, ChunkPart::exp_avg_sq, slice(training.shard_adam_v(g)), sl.param_begin);
    } else if (root) {
      SDP_CHECK(!selection.optimizer_state || p.is_trained(id), "rank_chunks: this rank is the "
                "root of group ", p.group_decl(g).name, " but does not train it");
      add(d, ChunkPart::values, training.values(id), 0);
      if (!moments) continue;
      add(d, ChunkPart::exp_avg, training.adam_m(id), 0);
      add(d, ChunkPart::exp_avg_sq, training.adam_v(id), 0);
    }
  }
  return out;
}

std::vector<Chunk> buffer_chunks(const ParameterSet& p, const std::string& file,
                                 Allocator& scratch, std::vector<OwnedTensor>& keep_alive) {
  std::vector<Chunk> out;
  for (int id = 0; id < p.count(); ++id)
    if (p.decl(id).buffer && p.is_materialized(id))
      add_chunk(out, p.decl(id), ChunkPart::buffer, p.param(id), 0, p.state_dtype(), file,
                scratch, keep_alive);
  return out;
}

nlohmann::json write_rank_file(const fs::path& dir, const std::string& file,
                               const std::vector<Chunk>& chunks) {
  std::vector<ck::NamedTensor> tensors;
  nlohmann::json entries = nlohmann::json::array();
  for (const Chunk& c : chunks) {
    SDP_CHECK(c.info.file == file, "write_rank_file: chunk ", c.info.tensor, " belongs to ",
              c.info.file, ", not ", file);
    tensors.push_back({c.info.tensor, c.data});
    entries.push_back(c.info.to_json());
  }
  ck::save_safetensors(dir / file, tensors, {{"format", "sdp-sharded"}});
  return entries;
}

nlohmann::json make_shard_index(const ShardIndexHeader& header, const ParameterSet& decls,
                                const std::vector<nlohmann::json>& chunks_by_rank) {
  SDP_CHECK(chunks_by_rank.size() == static_cast<size_t>(header.world_size), "make_shard_index: ",
            chunks_by_rank.size(), " ranks' chunks for a world of ", header.world_size);
  nlohmann::json files = nlohmann::json::array(), tensors = nlohmann::json::array(),
                 chunks = nlohmann::json::array();
  for (int r = 0; r < header.world_size; ++r) files.push_back(rank_file_name(r, header.world_size));
  for (const FullTensor& t : full_tensors(decls))
    tensors.push_back({{"name", t.name},
                       {"shape", shape_json(t.shape)},
                       {"buffer", decls.decl(t.parts.front()).buffer}});
  for (const nlohmann::json& rank : chunks_by_rank)
    for (const nlohmann::json& c : rank) chunks.push_back(c);
  return {{"format", "sdp-sharded"},
          {"format_version", kShardFormatVersion},
          {"world_size", header.world_size},
          {"architecture", header.architecture},
          {"model", {{"name", header.model}, {"num_classes", header.num_classes}}},
          {"dtype", dtype_name(header.dtype)},
          {"files", files},
          {"tensors", tensors},
          {"chunks", chunks}};
}

// ---------------------------------------------------------------- reading

namespace {

Shape parse_shape(const nlohmann::json& j, const std::string& what) {
  if (!j.is_array() || j.size() > static_cast<size_t>(kMaxDims))
    fail(what, " is ", j.dump(), " (valid: an array of at most ", kMaxDims, " sizes)");
  Shape s;
  for (const auto& d : j) s.push_back(json_integer<int64_t>(d, what + " entry", 0));
  return s;
}

// Range-checked in the type the field is used in: 2^32 is no axis 0.
template <typename Int = int64_t>
Int integer_field(const nlohmann::json& j, const char* key, const std::string& what,
                  Int lo = std::numeric_limits<Int>::min(),
                  Int hi = std::numeric_limits<Int>::max()) {
  const auto it = j.find(key);
  if (it == j.end())
    fail(what, ": field '", key, "' is missing (valid: an integer)");
  return json_integer<Int>(*it, what + ": field '" + key + "'", lo, hi);
}

// A name from the index for a message: control characters (a NUL would
// end the message where it is printed) shown escaped, as JSON writes them.
std::string shown(const std::string& name) {
  const std::string quoted = nlohmann::json(name).dump(-1, ' ', false,
                                                       nlohmann::json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

std::string string_field(const nlohmann::json& j, const char* key, const std::string& what) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    fail(what, ": field '", key, "' ", it == j.end() ? "is missing" : "= " + it->dump(),
         " (valid: a string)");
  return it->get<std::string>();
}

const nlohmann::json& array_field(const nlohmann::json& j, const char* key,
                                  const std::string& what) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array())
    fail(what, ": field '", key, "' ", it == j.end() ? "is missing" : "is not an array",
         " (valid: an array)");
  return *it;
}

}  // namespace

ShardedCheckpoint::ShardedCheckpoint(const fs::path& dir)
    : dir_(dir), index_path_(dir / kShardIndexFileName) {
  const std::string where = "sharded checkpoint index '" + index_path_.string() + "'";
  if (!fs::exists(index_path_))
    fail(where, " is missing (a sharded checkpoint directory holds ", kShardIndexFileName,
         " next to its rank-*-of-*.safetensors files)");
  index_ = ck::read_json_file(index_path_);
  try {
    check_index(where);
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": ", e.what());
  }
}

void ShardedCheckpoint::check_index(const std::string& where) {
  if (!index_.is_object()) fail(where, ": expected a JSON object, got ", index_.type_name());
  if (index_.value("format", std::string()) != "sdp-sharded")
    fail(where, ": field 'format' is ", index_.contains("format") ? index_["format"].dump()
                                                                   : std::string("missing"),
         " (valid: \"sdp-sharded\")");
  const int64_t version = integer_field(index_, "format_version", where);
  if (version != kShardFormatVersion)
    fail(where, ": format_version = ", version, " (this build reads version ",
         kShardFormatVersion, ")");
  const int64_t world = integer_field(index_, "world_size", where);
  if (world < 1 || world > 1'000'000)
    fail(where, ": world_size = ", world, " (valid: at least 1)");
  world_size_ = static_cast<int>(world);
  if (!index_.contains("architecture")) fail(where, ": field 'architecture' is missing");
  // The state dtype every chunk is stored in: the one check sdp-train and
  // sdp-export share (read_full holds each chunk to it).
  const std::string dtype = string_field(index_, "dtype", where);
  if (dtype == "f32")
    dtype_ = DType::f32;
  else if (dtype == "f64")
    dtype_ = DType::f64;
  else
    fail(where, ": field 'dtype' = \"", shown(dtype), "\" (valid: \"f32\", \"f64\")");

  // Every rank's file, present.
  const nlohmann::json& files = array_field(index_, "files", where);
  if (files.size() != static_cast<size_t>(world_size_))
    fail(where, ": lists ", files.size(), " rank files for world_size ", world_size_);
  for (int r = 0; r < world_size_; ++r) {
    const std::string expected = rank_file_name(r, world_size_);
    if (files[static_cast<size_t>(r)] != expected)
      fail(where, ": rank file ", r, " is ", files[static_cast<size_t>(r)].dump(),
           " (valid: \"", expected, "\")");
    if (!fs::exists(dir_ / expected))
      fail(where, " names rank file '", (dir_ / expected).string(), "', which is missing");
  }

  std::map<std::string, size_t> tensor_at;
  for (const nlohmann::json& t : array_field(index_, "tensors", where)) {
    TensorEntry e;
    e.name = string_field(t, "name", where + ": a tensor");
    e.shape = parse_shape(t.value("shape", nlohmann::json()),
                          where + ": tensor '" + shown(e.name) + "''s shape");
    e.buffer = t.value("buffer", false);
    if (!tensor_at.emplace(e.name, tensors_.size()).second)
      fail(where, ": tensor '", shown(e.name), "' is listed twice");
    tensors_.push_back(std::move(e));
  }

  for (const nlohmann::json& j : array_field(index_, "chunks", where)) {
    ChunkInfo c;
    const std::string what = where + ": a chunk";
    c.file = string_field(j, "file", what);
    c.tensor = string_field(j, "tensor", what);
    c.full_name = string_field(j, "full_name", what);
    const std::string chunk = where + ": chunk '" + shown(c.tensor) + "' of '" + shown(c.file) + "'";
    const auto part = parse_chunk_part(string_field(j, "part", chunk));
    if (!part)
      fail(chunk, ": part ", j["part"].dump(), " (valid: values, exp_avg, exp_avg_sq, buffer)");
    c.part = *part;
    c.full_shape = parse_shape(j.value("full_shape", nlohmann::json()), chunk + ": full_shape");
    c.axis = integer_field<int>(j, "axis", chunk);
    c.start = integer_field(j, "start", chunk);
    c.length = integer_field(j, "length", chunk);
    c.begin = integer_field(j, "begin", chunk);
    c.end = integer_field(j, "end", chunk);
    if (std::find(files.begin(), files.end(), c.file) == files.end())
      fail(chunk, ": its file is none of the index's rank files");
    const auto t = tensor_at.find(c.full_name);
    if (t == tensor_at.end())
      fail(chunk, ": names tensor '", shown(c.full_name), "', which the index does not list");
    const TensorEntry& entry = tensors_[t->second];
    if (c.full_shape != entry.shape)
      fail(chunk, ": full_shape ", c.full_shape.str(), ", but tensor '", shown(c.full_name), "' is ",
           entry.shape.str());
    if ((c.part == ChunkPart::buffer) != entry.buffer)
      fail(chunk, ": part ", chunk_part_name(c.part), " of ", entry.buffer ? "buffer" : "parameter",
           " '", shown(c.full_name), "'");
    const int ndim = c.full_shape.ndim();
    const int64_t extent = ndim > 0 && c.axis >= 0 && c.axis < ndim ? c.full_shape[c.axis] : 1;
    if ((ndim > 0 && (c.axis < 0 || c.axis >= ndim || c.axis > 1)) || (ndim == 0 && c.axis != 0))
      fail(chunk, ": axis ", c.axis, " (valid: 0 or 1, inside ", c.full_shape.str(), ")");
    if (c.start < 0 || c.length < 0 || c.start + c.length > extent)
      fail(chunk, ": piece [", c.start, ", ", c.start + c.length, ") along axis ", c.axis,
           " lies outside ", c.full_shape.str());
    const int64_t piece = c.piece_shape().numel();
    if (c.begin < 0 || c.end <= c.begin || c.end > piece)
      fail(chunk, ": elements [", c.begin, ", ", c.end, ") (valid: a non-empty range inside the "
           "piece's ", piece, ")");
    chunks_[{c.full_name, c.part}].push_back(std::move(c));
  }

  // Each part of each tensor: pieces along one axis that tile it, each
  // covered by chunks that tile its elements; nothing twice, nothing left out.
  for (auto& [key, list] : chunks_) {
    const auto& [name, part] = key;
    std::sort(list.begin(), list.end(), [](const ChunkInfo& a, const ChunkInfo& b) {
      return std::pair(a.start, a.begin) < std::pair(b.start, b.begin);
    });
    const std::string what = where + ": the " + std::string(chunk_part_name(part)) + " of '" +
                             name + "' " + list.front().full_shape.str();
    const int axis = list.front().axis;
    const int64_t extent = list.front().full_shape.ndim() > 0 ? list.front().full_shape[axis] : 1;
    int64_t next_start = 0;
    for (size_t i = 0; i < list.size();) {
      const ChunkInfo& first = list[i];
      if (first.axis != axis)
        fail(what, ": chunks cut it along axes ", axis, " and ", first.axis, " (valid: one axis)");
      if (first.start != next_start)
        fail(what, ": ", first.start > next_start ? "no chunk covers" : "chunks overlap on",
             " [", std::min(first.start, next_start), ", ", std::max(first.start, next_start),
             ") along axis ", axis);
      const int64_t piece = first.piece_shape().numel();
      int64_t next = 0;
      for (; i < list.size() && list[i].start == first.start; ++i) {
        const ChunkInfo& c = list[i];
        if (c.length != first.length)
          fail(what, ": pieces [", c.start, ", +", c.length, ") and [", first.start, ", +",
               first.length, ") along axis ", axis, " overlap");
        if (c.begin != next)
          fail(what, ": in piece [", c.start, ", ", c.start + c.length, ") along axis ", axis,
               ", ", c.begin > next ? "no chunk covers" : "chunks overlap on", " elements [",
               std::min(c.begin, next), ", ", std::max(c.begin, next), ")");
        next = c.end;
      }
      if (next != piece)
        fail(what, ": in piece [", first.start, ", ", first.start + first.length,
             ") along axis ", axis, ", no chunk covers elements [", next, ", ", piece, ")");
      next_start = first.start + first.length;
    }
    if (next_start != extent)
      fail(what, ": no chunk covers [", next_start, ", ", extent, ") along axis ", axis);
  }
  for (const TensorEntry& t : tensors_)
    if (!contains(t.name, t.buffer ? ChunkPart::buffer : ChunkPart::values))
      fail(where, ": no chunk holds the ", t.buffer ? "buffer" : "values", " of tensor '", t.name,
           "'");
}

const ck::SafetensorsFile& ShardedCheckpoint::file(const std::string& name) const {
  auto it = files_.find(name);
  if (it == files_.end()) it = files_.emplace(name, ck::SafetensorsFile(dir_ / name)).first;
  return it->second;
}

OwnedTensor ShardedCheckpoint::read_full(const std::string& full_name, ChunkPart part,
                                         Allocator& scratch) const {
  const auto it = chunks_.find({full_name, part});
  if (it == chunks_.end()) {
    const bool known = std::any_of(tensors_.begin(), tensors_.end(),
                                   [&](const TensorEntry& t) { return t.name == full_name; });
    fail("sharded checkpoint '", dir_.string(), "': ",
         known ? format("no chunk holds the ", chunk_part_name(part), " of tensor '", full_name,
                        "'")
               : format("it has no tensor '", full_name, "' (it holds ", tensors_.size(),
                        " tensors of another model, or the model changed)"));
  }
  const std::vector<ChunkInfo>& list = it->second;
  std::optional<DType> dtype;
  // Checks a chunk's tensor in its file: present, of the dtype of the
  // others and of the element count the index says.
  auto stored = [&](const ChunkInfo& c) {
    const ck::SafetensorsFile& f = file(c.file);
    const std::string where = "sharded checkpoint file '" + f.path().string() + "'";
    if (!f.contains(c.tensor))
      fail(where, " lacks tensor '", c.tensor, "', which ", kShardIndexFileName, " places there");
    const ck::SafetensorsTensorInfo info = f.info(c.tensor);
    // The shape the writer gives a chunk (add_chunk): a whole piece keeps
    // its own, a slice of one is flat. Same element count is not enough.
    const Shape piece = c.piece_shape();
    const Shape expected = c.begin == 0 && c.end == piece.numel() ? piece : Shape{c.end - c.begin};
    if (info.shape != expected)
      fail(where, ": tensor '", shown(c.tensor), "' has shape ", info.shape.str(),
           " in the file's header, but ", kShardIndexFileName, " says ", expected.str());
    if (info.dtype != dtype_)
      fail(where, ": tensor '", shown(c.tensor), "' is ", dtype_name(info.dtype), ", but ",
           kShardIndexFileName, " says the chunks are ", dtype_name(dtype_));
    dtype = info.dtype;
    return info;
  };
  for (const ChunkInfo& c : list) stored(c);
  OwnedTensor full(scratch, list.front().full_shape, *dtype, MemCategory::workspace);
  const size_t esize = dtype_size(*dtype);
  for (size_t i = 0; i < list.size();) {
    const ChunkInfo& first = list[i];
    const Shape piece_shape = first.piece_shape();
    const bool whole = piece_shape == first.full_shape;
    OwnedTensor piece;
    if (!whole) piece = OwnedTensor(scratch, piece_shape, *dtype, MemCategory::workspace);
    char* base = static_cast<char*>(whole ? full->raw() : piece->raw());
    for (; i < list.size() && list[i].start == first.start; ++i) {
      const ChunkInfo& c = list[i];
      const ck::SafetensorsTensorInfo info = stored(c);
      file(c.file).read_into(c.tensor, Tensor(base + static_cast<size_t>(c.begin) * esize,
                                              info.shape, *dtype, Device::cpu));
    }
    if (whole) continue;
    ParamDecl d;
    d.name = full_name;
    d.full_name = full_name;
    d.shape = piece_shape;
    d.full_shape = first.full_shape;
    d.piece_axis = first.axis;
    d.piece_start = first.start;
    Tensor target = *full;
    copy_part_to_full(d, *piece, target);
  }
  return full;
}

void read_sharded_parameter_set(TrainingState& training, const ShardedCheckpoint& checkpoint,
                                bool moments) {
  const ParameterSet& p = training.params();
  CpuAllocator scratch;
  const DType state = p.state_dtype();
  // The last whole tensor rebuilt, in the state dtype: consecutive pieces of
  // one tensor (a rank holding several neuron groups) rebuild it once.
  std::optional<std::pair<std::string, ChunkPart>> cached_key;
  OwnedTensor cached;
  auto whole = [&](const ParamDecl& d, ChunkPart part) -> const Tensor& {
    const std::pair<std::string, ChunkPart> key{d.full_name, part};
    if (cached_key == key) return *cached;
    cached = OwnedTensor();
    cached_key.reset();
    OwnedTensor t = checkpoint.read_full(d.full_name, part, scratch);
    // NaN, or a negative second moment, would poison the next update.
    ck::check_loaded_values(*t, part == ChunkPart::exp_avg_sq, checkpoint.dir(),
                            format(chunk_part_name(part), " of '", d.full_name, "'"));
    if (t->shape() != d.full_shape)
      fail("sharded checkpoint '", checkpoint.dir().string(), "': tensor '", d.full_name,
           "' is ", t->shape().str(), " there, but this model's is ", d.full_shape.str());
    if (t->dtype() != state) {
      // A checkpoint of another dtype (an f64 run's into an f32 one) is
      // read as stored and converted.
      OwnedTensor converted(scratch, d.full_shape, state, MemCategory::workspace);
      stage_copy(*t, *converted);
      t = std::move(converted);
    }
    cached = std::move(t);
    cached_key = key;
    return *cached;
  };
  using Part = TrainingState::Part;
  auto load = [&](int id, ChunkPart part, Part into) {
    const ParamDecl& d = p.decl(id);
    const Tensor& full = whole(d, part);
    OwnedTensor host(scratch, d.shape, state, MemCategory::workspace);
    copy_full_to_part(d, full, *host);
    training.assign(id, into, *host);
  };
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_materialized(id)) continue;
    const ParamDecl& d = p.decl(id);
    load(id, d.buffer ? ChunkPart::buffer : ChunkPart::values, Part::values);
    if (!moments || !training.keeps_training_state(d.group) || d.buffer) continue;
    load(id, ChunkPart::exp_avg, Part::adam_m);
    load(id, ChunkPart::exp_avg_sq, Part::adam_v);
  }
}

// ---------------------------------------------------------------- saving

namespace {

// A status and a text from `root` to every rank (host words through the
// communicator): the staging directory, or a failure's message.
struct Word {
  bool ok = true;
  std::string text;
  bool permanent = false;  // a failure a restart cannot cure (a full disk, no permission)
};

// On the wire the status is one word: 1 ok, 0 failed, 2 failed permanently.
int32_t status_word(const Word& w) { return w.ok ? 1 : w.permanent ? 2 : 0; }
Word word_of(int32_t status, std::string text) {
  return {status == 1, std::move(text), status == 2};
}
Word failure_of(const std::exception& e) {
  return {false, e.what(), dynamic_cast<const PermanentError*>(&e) != nullptr};
}

Word broadcast_word(comm::Communicator& world, int root, const Word& mine) {
  if (mine.text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2))
    fail("save: a message of ", mine.text.size(), " bytes is too long to send");
  std::vector<int32_t> head = {status_word(mine), static_cast<int32_t>(mine.text.size())};  // [2]
  Tensor h(head.data(), {2}, DType::i32, Device::cpu);
  world.broadcast(h, root);
  std::vector<int32_t> words(std::max<size_t>((static_cast<size_t>(head[1]) + 3) / 4, 1), 0);
  if (world.rank() == root) std::memcpy(words.data(), mine.text.data(), mine.text.size());
  Tensor w(words.data(), {static_cast<int64_t>(words.size())}, DType::i32, Device::cpu);
  world.broadcast(w, root);
  return word_of(head[0], std::string(reinterpret_cast<const char*>(words.data()),
                                      static_cast<size_t>(head[1])));
}

// Every rank's status and text, by rank.
std::vector<Word> gather_words(comm::Communicator& world, const Word& mine) {
  if (mine.text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2))
    fail("save: a message of ", mine.text.size(), " bytes is too long to send");
  const int32_t head[2] = {status_word(mine), static_cast<int32_t>(mine.text.size())};
  const std::vector<int32_t> heads = comm::all_gather_host_words(world, head);  // [size * 2]
  int32_t longest = 0;
  for (int r = 0; r < world.size(); ++r) longest = std::max(longest, heads[2 * r + 1]);
  std::vector<int32_t> words(std::max<size_t>((static_cast<size_t>(longest) + 3) / 4, 1), 0);
  std::memcpy(words.data(), mine.text.data(), mine.text.size());
  const std::vector<int32_t> all = comm::all_gather_host_words(world, words);  // [size * n]
  std::vector<Word> out(static_cast<size_t>(world.size()));
  for (size_t r = 0; r < out.size(); ++r)
    out[r] = word_of(heads[2 * r],
                     std::string(reinterpret_cast<const char*>(all.data() + r * words.size()),
                                 static_cast<size_t>(heads[2 * r + 1])));
  return out;
}

}  // namespace

void save_sharded_checkpoint(comm::Communicator& world, const fs::path& dir,
                             const ShardedSave& save) {
  SDP_CHECK(save.params, "save_sharded_checkpoint: no parameter set");
  const int rank = world.rank(), size = world.size();
  const bool rank0 = rank == 0;
  SDP_CHECK(!rank0 || save.model, "save_sharded_checkpoint: rank 0 needs the model");
  auto failed = [&](int who, const Word& w) {
    throw CollectiveError(format("saving sharded checkpoint '", dir.string(), "' failed on rank ",
                                 who, ": ", w.text),
                          w.permanent);
  };

  // 1. Rank 0 opens the transaction; every rank learns its staging directory.
  std::unique_ptr<ck::DirectoryTransaction> tx;
  Word staging;
  if (rank0) {
    try {
      tx = std::make_unique<ck::DirectoryTransaction>(dir);
      staging.text = tx->staging_dir().string();
    } catch (const std::exception& e) {
      staging = failure_of(e);
    }
  }
  staging = broadcast_word(world, 0, staging);
  if (!staging.ok) failed(0, staging);
  const fs::path out = staging.text;

  // 2. Each rank writes its own file.
  const std::string file = rank_file_name(rank, size);
  Word written;
  try {
    CpuAllocator scratch;
    std::vector<OwnedTensor> keep_alive;
    std::vector<Chunk> chunks = rank_chunks(*save.params, save.selection, file, scratch, keep_alive);
    if (rank0 && save.buffers_from)
      for (Chunk& c : buffer_chunks(*save.buffers_from, file, scratch, keep_alive))
        chunks.push_back(std::move(c));
    written.text = write_rank_file(out, file, chunks).dump();
  } catch (const std::exception& e) {
    written = failure_of(e);
  }
  const std::vector<Word> by_rank = gather_words(world, written);
  for (int r = 0; r < size; ++r)
    if (!by_rank[static_cast<size_t>(r)].ok) failed(r, by_rank[static_cast<size_t>(r)]);

  // 3. Rank 0 writes the index and the files of the whole run, and commits.
  Word committed;
  if (rank0) {
    try {
      std::vector<nlohmann::json> chunks;
      for (const Word& w : by_rank) chunks.push_back(nlohmann::json::parse(w.text));
      ck::write_json_atomically(out / kShardIndexFileName,
                                make_shard_index(save.header, save.model->params(), chunks));
      write_hf_config(*save.model, save.header.dtype, out, save.hf);
      ck::write_json_atomically(out / kStateFileName, save.state);
      tx->commit();
    } catch (const std::exception& e) {
      committed = failure_of(e);
    }
  }
  committed = broadcast_word(world, 0, committed);
  if (!committed.ok) failed(0, committed);
}

}  // namespace sdp
