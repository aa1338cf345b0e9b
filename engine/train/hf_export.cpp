#include "engine/train/hf_export.h"

#include <vector>

#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"

namespace sdp {

void export_hf_model(const llama::LlamaModel& model, const std::filesystem::path& dir) {
  const ParameterSet& p = model.params();
  std::vector<checkpoint::NamedTensor> weights;
  for (int id = 0; id < p.count(); ++id) {
    const Tensor t = p.param(id);  // throws when the group is not held here
    SDP_CHECK(t.device() == Device::cpu, "export_hf_model: parameter ", p.decl(id).name,
              " is on device ", device_name(t.device()), "; weights are written from host memory");
    weights.push_back({p.decl(id).name, t});
  }
  std::filesystem::create_directories(dir);
  checkpoint::save_safetensors(dir / "model.safetensors", weights, {{"format", "pt"}});
  checkpoint::write_json_atomically(dir / "config.json", model.config().to_hf_json());
}

}  // namespace sdp
