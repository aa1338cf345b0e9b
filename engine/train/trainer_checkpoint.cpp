// Trainer::save_checkpoint / load_checkpoint: the on-disk layout of a
// checkpoint directory.
//   model.safetensors      parameters under Hugging Face LLaMA names (the
//                          tied head is stored once, as HF does)
//   config.json            Hugging Face config (LlamaConfig::to_hf_json)
//                          (these two are written by export_hf_model, hf_export.h)
//   optimizer.safetensors  AdamW moments: "exp_avg.<name>", "exp_avg_sq.<name>"
//   trainer_state.json     step, training config, data position
// The directory is written through a DirectoryTransaction: a crash leaves
// either the previous checkpoint or the new one, never a mix.
#include <cstdio>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/train/hf_export.h"
#include "engine/train/trainer.h"

namespace sdp {

namespace fs = std::filesystem;
namespace ck = checkpoint;

namespace {
constexpr int kFormatVersion = 1;
}

void Trainer::save_checkpoint(const fs::path& dir) const {
  SDP_CHECK(alloc_->device() == Device::cpu, "checkpoints are written from host memory; device ",
            device_name(alloc_->device()), " runs cannot save them");
  const ParameterSet& p = model_->params();
  std::vector<ck::NamedTensor> moments;
  for (int id = 0; id < p.count(); ++id) {
    const std::string& name = p.decl(id).name;
    moments.push_back({"exp_avg." + name, p.adam_m(id)});
    moments.push_back({"exp_avg_sq." + name, p.adam_v(id)});
  }
  ck::DirectoryTransaction tx(dir);
  const fs::path& out = tx.staging_dir();
  export_hf_model(*model_, out);  // model.safetensors + config.json
  ck::save_safetensors(out / "optimizer.safetensors", moments);
  ck::write_json_atomically(out / "trainer_state.json",
                            {{"format_version", kFormatVersion},
                             {"step", step_},
                             {"train_config", config_.to_json()},
                             {"data", train_data_->state()},
                             // Every random draw (initialization, synthetic
                             // data) is counter-based: the seed and the data
                             // position above are the whole generator state.
                             {"rng", {{"kind", "counter-based"}, {"seed", config_.seed}}}});
  tx.commit();
}

void Trainer::load_checkpoint(const fs::path& dir) {
  const nlohmann::json state = ck::read_json_file(dir / "trainer_state.json");
  if (state.value("format_version", 0) != kFormatVersion)
    fail("checkpoint ", dir.string(), ": format_version ", state.value("format_version", 0),
         " is not supported (this build reads version ", kFormatVersion, ")");
  const auto saved_model = llama::LlamaConfig::from_hf_json(ck::read_json_file(dir / "config.json"));
  const auto& mine = model_->config();
  if (saved_model.to_hf_json().dump() != mine.to_hf_json().dump())
    fail("checkpoint ", dir.string(), " holds model ", saved_model.name, " (",
         saved_model.parameter_count(), " parameters), but this run builds ", mine.name, " (",
         mine.parameter_count(), " parameters)");

  ParameterSet& p = model_->params();
  const ck::SafetensorsFile weights(dir / "model.safetensors");
  const ck::SafetensorsFile moments(dir / "optimizer.safetensors");
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_materialized(id)) continue;
    const std::string& name = p.decl(id).name;
    weights.read_into(name, p.param(id));
    moments.read_into("exp_avg." + name, p.adam_m(id));
    moments.read_into("exp_avg_sq." + name, p.adam_v(id));
  }
  // A resumed run reproduces the uninterrupted one only with the same data
  // stream; other fields (steps, lr, ...) may change on purpose.
  const nlohmann::json saved_cfg = state.value("train_config", nlohmann::json::object());
  const nlohmann::json now_cfg = config_.to_json();
  for (const char* field : {"data", "seed", "batch", "seq", "grad_accum"})
    if (saved_cfg.contains(field) && saved_cfg[field] != now_cfg[field])
      std::fprintf(stderr,
                   "sdp-train: warning: resuming with %s = %s, but the checkpoint was trained "
                   "with %s; the run will not match an uninterrupted one\n",
                   field, now_cfg[field].dump().c_str(), saved_cfg[field].dump().c_str());
  step_ = state.at("step").get<int64_t>();
  train_data_->restore(state.at("data"));
}

}  // namespace sdp
