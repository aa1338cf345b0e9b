#include "models/registry.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "models/common/model_spec.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_model.h"
#include "models/resnet/resnet_config.h"
#include "models/resnet/resnet_model.h"
#include "models/swin/swin_config.h"
#include "models/swin/swin_model.h"

namespace sdp {

std::vector<std::string> model_names() {
  std::vector<std::string> names = llama::LlamaConfig::names();
  for (const auto& n : resnet::ResNetConfig::names()) names.push_back(n);
  for (const auto& n : swin::SwinConfig::names()) names.push_back(n);
  return names;
}

namespace {

ModelFamily named_family(const std::string& name) {
  const auto llama_names = llama::LlamaConfig::names();
  if (std::find(llama_names.begin(), llama_names.end(), name) != llama_names.end())
    return ModelFamily::llama;
  if (resnet::ResNetConfig::is_name(name)) return ModelFamily::resnet;
  if (swin::SwinConfig::is_name(name)) return ModelFamily::swin;
  std::string valid;
  for (const auto& n : model_names()) valid += (valid.empty() ? "" : ", ") + n;
  fail("unknown model '", name, "' (valid: ", valid, "), or a custom model: ",
       model_spec_forms());
}

nlohmann::json read_model_config_json(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("model config:", path, ": a directory (expected a config.json file)");
  std::ifstream in(path);
  if (!in) fail("model config:", path, ": cannot open the file");
  try {
    nlohmann::json j;
    in >> j;
    return j;
  } catch (const nlohmann::json::exception& e) {
    fail("model config:", path, ": not valid JSON: ", e.what());
  }
}

// A config.json of another architecture (GPT-2, Mistral, a ResNet) would
// otherwise read as a LLaMA wherever its field names happen to match.
llama::LlamaConfig llama_from_file(const std::string& path) {
  const nlohmann::json j = read_model_config_json(path);
  const nlohmann::json type = j.is_object() ? j.value("model_type", nlohmann::json()) : nullptr;
  if (type != "llama")
    fail("model config:", path, ": model_type ", type.dump(),
         " is not a LLaMA (valid: a Hugging Face LlamaForCausalLM config.json, model_type "
         "\"llama\")");
  try {
    return llama::LlamaConfig::from_hf_json(j);
  } catch (const Error& e) {
    fail("model config:", path, ": ", e.what());
  }
}

// Applies a spec's overrides to its named config; a custom config is named
// by its spec, so checkpoints of different models never share a name.
template <typename Config>
Config with_overrides(Config c, const ModelSpec& spec) {
  if (spec.custom()) c.name = spec.text();
  for (const auto& [key, value] : spec.overrides) c.set(key, value);
  try {
    c.validate();
  } catch (const Error& e) {
    if (!spec.custom()) throw;
    fail("model '", spec.text(), "': ", e.what());
  }
  return c;
}

resnet::ResNetConfig resnet_config(const std::string& name, int64_t classes) {
  const ModelSpec spec = ModelSpec::parse(name);
  return with_overrides(resnet::ResNetConfig::named(spec.name, classes), spec);
}

swin::SwinConfig swin_config(const std::string& name, int64_t classes) {
  const ModelSpec spec = ModelSpec::parse(name);
  return with_overrides(swin::SwinConfig::named(spec.name, classes), spec);
}

}  // namespace

ModelFamily model_family(const std::string& name) {
  const ModelSpec spec = ModelSpec::parse(name);
  if (!spec.config_path.empty()) return ModelFamily::llama;
  return named_family(spec.name);
}

llama::LlamaConfig llama_config(const std::string& name) {
  const ModelSpec spec = ModelSpec::parse(name);
  if (!spec.config_path.empty()) return llama_from_file(spec.config_path);
  if (named_family(spec.name) != ModelFamily::llama)
    fail("model '", name, "' is a ", model_family_name(named_family(spec.name)),
         " model, not a LLaMA");
  return with_overrides(llama::LlamaConfig::named(spec.name), spec);
}

std::string resolved_model_spec(const std::string& name, int64_t data_vocab) {
  const ModelSpec spec = ModelSpec::parse(name);
  if (!spec.custom()) return name;
  if (!spec.config_path.empty())
    return "config:" + std::filesystem::absolute(spec.config_path).lexically_normal().string();
  if (named_family(spec.name) == ModelFamily::llama && !spec.has("vocab") && data_vocab > 0)
    return with_model_override(name, "vocab", std::to_string(data_vocab));
  return spec.text();
}

const char* model_family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::llama: return "llama";
    case ModelFamily::resnet: return "resnet";
    case ModelFamily::swin: return "swin";
  }
  return "?";
}

bool is_image_family(ModelFamily family) { return family != ModelFamily::llama; }

bool is_image_model(const std::string& name) { return is_image_family(model_family(name)); }

int64_t required_image_size(const std::string& name) {
  if (model_family(name) != ModelFamily::swin) return 0;
  return swin_config(name, 10).img_size;
}

double default_drop_path(const std::string& name) {
  if (model_family(name) != ModelFamily::swin) return 0.0;
  return swin::SwinConfig::default_drop_path(ModelSpec::parse(name).name);
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelLayout& layout,
                                  const ModelDataFacts& facts) {
  const ModelLayout full = with_default_groups(name, layout);
  if (model_family(name) == ModelFamily::llama)
    return std::make_unique<llama::LlamaModel>(llama_config(name), full);
  const int64_t classes = facts.num_classes > 0 ? facts.num_classes : 10;
  if (model_family(name) == ModelFamily::swin)
    return std::make_unique<swin::SwinModel>(swin_config(name, classes), full);
  return std::make_unique<resnet::ResNetModel>(resnet_config(name, classes), full);
}

namespace {
int largest_divisor_up_to(int limit, const std::vector<int64_t>& sizes) {
  for (int g = limit; g > 1; --g) {
    bool divides = true;
    for (int64_t s : sizes) divides &= s % g == 0;
    if (divides) return g;
  }
  return 1;
}
}  // namespace

ModelLayout with_default_groups(const std::string& name, ModelLayout layout) {
  if (model_family(name) == ModelFamily::llama) {
    const auto c = llama_config(name);
    if (layout.ffn_groups <= 0) layout.ffn_groups = largest_divisor_up_to(4, {c.ffn_dim});
    if (layout.head_groups <= 0) layout.head_groups = largest_divisor_up_to(4, {c.n_kv_heads});
  } else if (model_family(name) == ModelFamily::swin) {
    const auto c = swin_config(name, 10);
    std::vector<int64_t> units, heads;
    for (int s = 0; s < c.stage_count(); ++s) {
      units.push_back(c.mlp_hidden(s));
      heads.push_back(c.num_heads[static_cast<size_t>(s)]);
    }
    if (layout.ffn_groups <= 0) layout.ffn_groups = largest_divisor_up_to(4, units);
    if (layout.head_groups <= 0) layout.head_groups = largest_divisor_up_to(4, heads);
  } else {
    const auto c = resnet_config(name, 10);
    if (layout.channel_groups <= 0)
      layout.channel_groups =
          largest_divisor_up_to(8, {c.widths[0], c.widths[1], c.widths[2], c.widths[3]});
  }
  return layout;
}

nlohmann::json model_architecture(const nlohmann::json& config) {
  if (!config.is_object()) return config;
  nlohmann::json arch = config;
  for (const char* key : {"torch_dtype", "bos_token_id", "eos_token_id", "pad_token_id",
                          "attention_dropout", "rope_scaling", "pretraining_tp",
                          "initializer_range", "transformers_version", "use_cache",
                          "drop_path_rate"})
    arch.erase(key);
  return arch;
}

std::string describe_model_config(const nlohmann::json& config) {
  const int64_t classes = config.is_object() ? config.value("num_classes", int64_t{10}) : 10;
  for (const std::string& name : model_names()) {
    const auto model = make_model(name, {}, {classes});
    if (model_architecture(model->config_json()) == model_architecture(config))
      return format(name, " (", model->parameter_count(), " parameters)");
  }
  // A custom model records its spec as its name (sdp_name for a LLaMA).
  const std::string recorded =
      !config.is_object() ? std::string()
      : config.contains("sdp_name") && config["sdp_name"].is_string()
          ? config["sdp_name"].get<std::string>()
      : config.contains("name") && config["name"].is_string() ? config["name"].get<std::string>()
                                                             : std::string();
  try {
    if (!recorded.empty() && ModelSpec::parse(recorded).custom()) {
      const auto model = make_model(recorded, {}, {classes});
      if (model_architecture(model->config_json()) == model_architecture(config))
        return format(recorded, " (", model->parameter_count(), " parameters)");
    }
  } catch (const Error&) {
    // Not a spec this build knows: described by its type below.
  }
  return format("of type '", config.is_object() ? config.value("model_type", std::string("?")) : "?",
                "' that matches no named model");
}

std::string model_summary(const std::string& name) {
  if (model_family(name) == ModelFamily::llama) {
    const auto c = llama_config(name);
    return format("LLaMA, ", c.n_layers, " blocks, dim ", c.dim, ", ", c.n_heads, " heads (",
                  c.n_kv_heads, " KV), FFN ", c.ffn_dim, ", vocab ", c.vocab, ", ",
                  c.parameter_count() / 1e6, "M parameters");
  }
  if (model_family(name) == ModelFamily::swin) {
    const auto c = swin_config(name, 10);
    std::string depths, heads;
    for (int s = 0; s < c.stage_count(); ++s) {
      if (s > 0) {
        depths += '-';
        heads += '-';
      }
      depths += std::to_string(c.depths[static_cast<size_t>(s)]);
      heads += std::to_string(c.num_heads[static_cast<size_t>(s)]);
    }
    return format("Swin Transformer, ", c.img_size, "x", c.img_size, " images, patch ",
                  c.patch_size, ", embed ", c.embed_dim, ", depths ", depths, ", heads ", heads,
                  ", window ", c.window_size, ", ", c.parameter_count() / 1e6,
                  "M parameters at 10 classes");
  }
  const auto c = resnet_config(name, 10);
  return format("CIFAR ResNet, ", c.block_count(), " basic blocks, widths ", c.widths[0], "-",
                c.widths[1], "-", c.widths[2], "-", c.widths[3], ", ",
                c.parameter_count() / 1e6, "M parameters at 10 classes");
}

}  // namespace sdp
