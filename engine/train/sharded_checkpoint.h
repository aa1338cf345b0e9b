#pragma once
// The sharded form of a checkpoint directory: every rank writes its own
// parts of the model, in parallel, and one index says where each piece of
// every Hugging Face tensor lies. The whole model never meets on one rank
// (the hf form, trainer_checkpoint.cpp, assembles it on rank 0), and the
// directory loads into any world size, plan, strategy and shard level, in
// one process or many. sdp-export turns it into the hf form.
//
//   rank-0000k-of-0000N.safetensors  the chunks rank k wrote (N = world size;
//                                    a rank that writes nothing has a file
//                                    with no tensors)
//   sdp_shards.json                  the index (below)
//   config.json                      as the hf form has them (write_hf_config,
//   generation_config.json,          hf_export.h): torch_dtype = the state
//   tokenizer.json,                  dtype the chunks are stored in
//   tokenizer_config.json
//   sdp_state.json                   step, training config, data position
//
// A chunk is a run of elements of one *piece* of an HF tensor, a piece as
// ParamDecl has it: [start, start + length) along `axis` of full_shape (a
// whole tensor is the piece along axis 0 of full length). The chunk covers
// the flat elements [begin, end) of that piece (row-major in the piece's
// own shape): a whole piece, or the slice of it in one rank's shard of a
// sharded storage group. In its rank file a chunk is stored in the piece's
// shape when it covers the whole piece, flat ([end - begin]) otherwise.
//
// sdp_shards.json:
//   { "format": "sdp-sharded", "format_version": 1, "world_size": N,
//     "architecture": model_architecture(config.json),
//     "model": {"name": registry name, "num_classes": data's classes or 0},
//     "dtype": "f32" | "f64",       (the state dtype every chunk is stored in)
//     "files": ["rank-00000-of-0000N.safetensors", ...],   (one per rank)
//     "tensors": [{"name": HF name, "shape": [...], "buffer": bool}, ...],
//                  every HF tensor, in the order the hf form writes them
//     "chunks": [{"file", "tensor" (name in the file), "full_name" (HF name),
//                 "part": "values" | "exp_avg" | "exp_avg_sq" | "buffer",
//                 "full_shape", "axis", "start", "length", "begin", "end"}] }
//
// Who writes what (each element of each part exactly once):
//   a sharded storage group  every owner writes its shard's slice of each
//                            parameter (values, and the AdamW moments)
//   an unsharded group       its root (StorageGroup::root) writes each
//                            parameter whole
//   buffers                  the group's root (BatchNorm running statistics,
//                            merged first), or rank 0 from its assembled
//                            full model where the hf form re-estimates them
// Values are the authoritative ones (master where kept), in the state dtype.
//
// Atomicity: rank 0 opens a DirectoryTransaction and sends its staging
// directory to every rank; each writes its file atomically into it; the
// ranks report success or their error to each other; rank 0 writes the
// index, the config files and sdp_state.json and commits; then tells every
// rank whether the commit succeeded. A rank that fails makes every rank
// throw the same error; a rank that dies or hangs ends the job through the
// collectives' deadlines. The directory must be on a filesystem every rank
// sees (a rank that cannot reach the staging directory fails the save).
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/train/hf_export.h"
#include "models/common/model.h"
#include "models/common/parameter_set.h"

namespace sdp {

inline constexpr const char* kShardIndexFileName = "sdp_shards.json";
inline constexpr int kShardFormatVersion = 1;

// Whether `dir` holds a checkpoint of the sharded form (its index).
bool is_sharded_checkpoint(const std::filesystem::path& dir);

// "rank-00003-of-00008.safetensors"
std::string rank_file_name(int rank, int world);

enum class ChunkPart : uint8_t { values, exp_avg, exp_avg_sq, buffer };
std::string_view chunk_part_name(ChunkPart part);

struct ChunkInfo {
  std::string file;       // the rank file, relative to the checkpoint directory
  std::string tensor;     // its name in that file
  std::string full_name;  // the Hugging Face tensor
  ChunkPart part = ChunkPart::values;
  Shape full_shape;
  int axis = 0;                   // the piece: [start, start + length)
  int64_t start = 0, length = 0;  //   along axis of full_shape
  int64_t begin = 0, end = 0;     // flat elements of the piece covered
  Shape piece_shape() const;
  nlohmann::json to_json() const;
};

// One chunk and its data: [end - begin] elements (or the piece's shape),
// host, contiguous, in the state dtype.
struct Chunk {
  ChunkInfo info;
  Tensor data;
};

// What one rank writes of its training state (see "Who writes what" above).
struct ChunkSelection {
  std::vector<bool> root;       // [groups]: this rank is the group's root
  bool optimizer_state = true;  // AdamW moments too
  bool buffers = true;          // the buffers of the groups it is root of
};

// The chunks a rank with training state `state` writes into rank file `file`.
// Needs no communication, so a test can stand in for every rank of a job.
// Device or low-precision parts are copied to host buffers from `scratch`
// that `keep_alive` owns until the chunks are written.
std::vector<Chunk> rank_chunks(const TrainingState& state, const ChunkSelection& selection,
                               const std::string& file, Allocator& scratch,
                               std::vector<OwnedTensor>& keep_alive);
// Every buffer of every held group of `p`, whole (rank 0's assembled full
// model, where the hf form writes re-estimated statistics).
std::vector<Chunk> buffer_chunks(const ParameterSet& p, const std::string& file,
                                 Allocator& scratch, std::vector<OwnedTensor>& keep_alive);

// Writes the chunks (all of one file) to dir / file atomically; returns
// their index entries, a JSON array.
nlohmann::json write_rank_file(const std::filesystem::path& dir, const std::string& file,
                               const std::vector<Chunk>& chunks);

// What the index says besides the chunks.
struct ShardIndexHeader {
  int world_size = 1;
  nlohmann::json architecture;  // model_architecture(config_json)
  std::string model;            // registry name
  int64_t num_classes = 0;      // ModelDataFacts
  DType dtype = DType::f32;     // state dtype of the chunks
};
// The index of a checkpoint: the tensors in `decls`' order (any cut of the
// model declares them all) and every rank's chunks ([world_size] arrays,
// from write_rank_file).
nlohmann::json make_shard_index(const ShardIndexHeader& header, const ParameterSet& decls,
                                const std::vector<nlohmann::json>& chunks_by_rank);

// A sharded checkpoint opened for reading. The constructor reads and checks
// the index: its version, that every chunk names a known tensor with its
// shape and a geometry inside it, that each tensor's chunks cover every
// element of each part exactly once, and that every rank file exists. Rank
// files are opened when a tensor in them is first read. Errors name the
// file and what is wrong.
class ShardedCheckpoint {
 public:
  explicit ShardedCheckpoint(const std::filesystem::path& dir);

  struct TensorEntry {
    std::string name;
    Shape shape;
    bool buffer = false;
  };
  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& index_path() const { return index_path_; }
  int world_size() const { return world_size_; }
  const nlohmann::json& index() const { return index_; }
  const nlohmann::json& architecture() const { return index_.at("architecture"); }
  // The index's "dtype": every chunk is stored in it (checked on reading).
  DType dtype() const { return dtype_; }
  // In the order the hf form writes them.
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  bool contains(const std::string& full_name, ChunkPart part) const {
    return chunks_.count({full_name, part}) != 0;
  }
  // The whole tensor `full_name`'s `part` rebuilt from its chunks:
  // [shape], in the dtype stored, from `scratch` (category workspace).
  OwnedTensor read_full(const std::string& full_name, ChunkPart part, Allocator& scratch) const;

 private:
  // Reads the index's fields and checks them (the constructor's work).
  void check_index(const std::string& where);
  const checkpoint::SafetensorsFile& file(const std::string& name) const;

  std::filesystem::path dir_, index_path_;
  nlohmann::json index_;
  int world_size_ = 0;
  DType dtype_ = DType::f32;
  std::vector<TensorEntry> tensors_;
  std::map<std::pair<std::string, ChunkPart>, std::vector<ChunkInfo>> chunks_;  // sorted
  mutable std::map<std::string, checkpoint::SafetensorsFile> files_;
};

// As read_parameter_set (hf_export.h) from a sharded checkpoint: every held
// parameter of `state` (and buffer), and with `moments` the AdamW moments of
// every trained one; each whole tensor is rebuilt on the host, cut to the
// piece this model stores and handed to TrainingState::assign, which keeps
// this rank's part of it.
void read_sharded_parameter_set(TrainingState& state, const ShardedCheckpoint& checkpoint,
                                bool moments);

// Everything one rank passes to save_sharded_checkpoint.
struct ShardedSave {
  const TrainingState* params = nullptr;  // this rank's
  ChunkSelection selection;
  // Rank 0: buffers are written from here (selection.buffers off everywhere).
  const ParameterSet* buffers_from = nullptr;
  // Rank 0 only: the model (config files, tensor order), the hf form's
  // options (tokenizer), sdp_state.json's contents and the index header.
  const Model* model = nullptr;
  HfExportOptions hf;
  nlohmann::json state;
  ShardIndexHeader header;
};

// Collective over `world`: writes checkpoint directory `dir` in the sharded
// form, atomically (see above).
void save_sharded_checkpoint(comm::Communicator& world, const std::filesystem::path& dir,
                             const ShardedSave& save);

}  // namespace sdp
