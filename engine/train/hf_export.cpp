#include "engine/train/hf_export.h"

#include <vector>

#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/train/hf_tokenizer.h"
#include "models/common/model.h"
#include "models/common/parameter_pieces.h"
#include "models/common/tensor_staging.h"

namespace sdp {

std::vector<checkpoint::NamedTensor> full_named_tensors(
    const ParameterSet& p, const std::function<Tensor(int)>& part_of, const std::string& prefix,
    Allocator& scratch, std::vector<OwnedTensor>& keep_alive, bool include_buffers) {
  std::vector<checkpoint::NamedTensor> out;
  // Files are written from host memory: a device part is copied to the host
  // first, in accum_dtype (f32 for a bf16 parameter without a master copy).
  auto host_part = [&](int id) -> Tensor {
    const Tensor t = part_of(id);  // throws when not held here
    if (t.device() == Device::cpu) return t;
    SDP_CHECK(t.device() != Device::meta, "checkpoint: ", p.decl(id).name,
              " is on the meta device and holds no values");
    keep_alive.emplace_back(scratch, t.shape(), accum_dtype(t.dtype()), MemCategory::workspace);
    Tensor host = *keep_alive.back();
    stage_copy(t, host);
    return host;
  };
  for (const FullTensor& full : full_tensors(p)) {
    const ParamDecl& first = p.decl(full.parts.front());
    if (first.buffer && !include_buffers) continue;
    const Tensor t0 = host_part(full.parts.front());
    if (full.parts.size() == 1 && !first.is_piece()) {
      out.push_back({prefix + full.name, t0});
      continue;
    }
    // Pieces (neuron-level components) are put back together so the file
    // holds the tensor Hugging Face expects.
    keep_alive.emplace_back(scratch, full.shape, t0.dtype(), MemCategory::workspace);
    Tensor whole = *keep_alive.back();
    for (int id : full.parts) copy_part_to_full(p.decl(id), host_part(id), whole);
    out.push_back({prefix + full.name, whole});
  }
  return out;
}

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::bf16: return "bfloat16";
    default: break;
  }
  fail("config.json: no torch dtype name for ", dtype_name(dtype));
}

std::vector<checkpoint::NamedTensor> full_moment_tensors(const TrainingState& state,
                                                       Allocator& scratch,
                                                       std::vector<OwnedTensor>& keep_alive) {
  const ParameterSet& p = state.params();
  auto moments = full_named_tensors(
      p, [&](int id) { return state.adam_m(id); }, "exp_avg.", scratch, keep_alive, false);
  for (auto& t : full_named_tensors(
           p, [&](int id) { return state.adam_v(id); }, "exp_avg_sq.", scratch, keep_alive, false))
    moments.push_back(t);
  return moments;
}

void write_hf_config(const Model& model, DType stored, const std::filesystem::path& dir,
                     const HfExportOptions& options) {
  nlohmann::json config = model.config_json();
  // A token model (LLaMA) is a Hugging Face model: its dtype and tokenizer too.
  if (model.token_vocabulary() > 0) {
    config["torch_dtype"] = torch_dtype_name(stored);
    set_special_token_ids(config, options.tokenizer);
    write_hf_tokenizer_files(options.tokenizer, model.max_sequence(), dir);
  }
  checkpoint::write_json_atomically(dir / "config.json", config);
}

void export_hf_model(const Model& model, const std::filesystem::path& dir,
                     const HfExportOptions& options, const TrainingState* state) {
  const ParameterSet& p = model.params();
  SDP_CHECK(!state || &state->params() == &p, "export: the training state is another model's");
  CpuAllocator scratch;
  std::vector<OwnedTensor> assembled;
  const auto weights = full_named_tensors(
      p, [&](int id) { return state ? state->values(id) : p.param(id); }, "", scratch, assembled);
  std::filesystem::create_directories(dir);
  checkpoint::save_tensor_collection(dir, "model", weights, options.max_shard_bytes,
                                     {{"format", "pt"}});
  // What the file holds: f64 for an f64 run, the f32 masters of a bf16 one.
  SDP_CHECK(!weights.empty(), "export: model ", model.name(), " has no parameters");
  const DType stored = weights.front().tensor.dtype();
  for (const auto& w : weights)
    SDP_CHECK(w.tensor.dtype() == stored, "export: ", w.name, " is ",
              dtype_name(w.tensor.dtype()), " but ", weights.front().name, " is ",
              dtype_name(stored), "; config.json names one torch_dtype");
  write_hf_config(model, stored, dir, options);
}

}  // namespace sdp
