#include "engine/train/sharded_export.h"

#include <string>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/tensor_collection.h"
#include "engine/core/error.h"
#include "engine/parallel/strategy.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/hf_export.h"
#include "engine/train/sharded_checkpoint.h"
#include "models/registry.h"

namespace sdp {

namespace fs = std::filesystem;
namespace ck = checkpoint;

void export_sharded_checkpoint(const fs::path& checkpoint, const fs::path& out,
                               uint64_t max_shard_bytes) {
  const ShardedCheckpoint sharded(checkpoint);
  const fs::path state_file = state_file_of(checkpoint);
  const nlohmann::json state = ck::read_json_file(state_file);
  const auto config = state.is_object() ? state.find("train_config") : state.end();
  if (!state.is_object() || config == state.end() || !config->is_object() ||
      !config->contains("model") || !(*config)["model"].is_string())
    fail("checkpoint state file '", state_file.string(), "': no train_config.model (the name of "
         "the model to export)");
  const std::string name = (*config)["model"].get<std::string>();

  // The whole model as one process holds it (DDP on one rank).
  ModelDataFacts facts;
  facts.num_classes = sharded.index().value("model", nlohmann::json::object())
                          .value("num_classes", int64_t{0});
  const SubnetLayout layout = SubnetLayout::build(name, StrategySpec{}, 1, 0, facts);
  CpuAllocator host;  // outlives the model
  const auto model = make_model(name, layout.model_layout, facts);
  if (sharded.architecture() != model_architecture(model->config_json()))
    fail("sharded checkpoint '", checkpoint.string(), "' holds another architecture than model ",
         name, " (", model->parameter_count(), " parameters) that its sdp_state.json names");
  // The index's dtype, which ShardedCheckpoint checked (as sdp-train does)
  // and holds every chunk to, so the tensors written match config.json's
  // torch_dtype (checked below).
  const auto training = TrainingState::materialize(*model, host, sharded.dtype());
  training->allocate_adam_state();
  read_sharded_parameter_set(*training, sharded, true);

  ck::DirectoryTransaction tx(out);
  const fs::path& staging = tx.staging_dir();
  {
    CpuAllocator scratch;
    std::vector<OwnedTensor> assembled;
    const auto weights = full_named_tensors(
        model->params(), [&](int id) { return training->values(id); }, "", scratch, assembled);
    ck::save_tensor_collection(staging, "model", weights, max_shard_bytes, {{"format", "pt"}});
    const auto moments = full_moment_tensors(*training, scratch, assembled);
    ck::save_tensor_collection(staging, "optimizer", moments, max_shard_bytes);
  }
  // config.json must describe the tensors written: a torch_dtype other
  // than the index's dtype would make transformers misread them.
  const fs::path config_file = checkpoint / "config.json";
  if (fs::exists(config_file)) {
    const nlohmann::json model_config = ck::read_json_file(config_file);
    const auto torch_dtype =
        model_config.is_object() ? model_config.find("torch_dtype") : model_config.end();
    if (model_config.is_object() && torch_dtype != model_config.end() &&
        *torch_dtype != torch_dtype_name(sharded.dtype()))
      fail("sharded checkpoint '", checkpoint.string(), "': config.json has torch_dtype ",
           torch_dtype->dump(), ", but ", kShardIndexFileName, " stores the tensors as ",
           dtype_name(sharded.dtype()), " (torch_dtype \"", torch_dtype_name(sharded.dtype()),
           "\"); refusing to export tensors that config.json misdescribes");
  }
  // The files that do not hold tensors are the hf form's already.
  for (const char* file : {"config.json", "generation_config.json", "tokenizer.json",
                           "tokenizer_config.json", kStateFileName}) {
    const fs::path from = checkpoint / file;
    if (fs::exists(from)) {
      fs::copy_file(from, staging / file, fs::copy_options::overwrite_existing);
    } else if (std::string(file) == "config.json" || std::string(file) == kStateFileName) {
      fail("sharded checkpoint '", checkpoint.string(), "' has no ", file);
    }
  }
  tx.commit();
}

}  // namespace sdp
