#include "models/registry.h"

#include <algorithm>

#include "engine/core/error.h"
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

ModelFamily model_family(const std::string& name) {
  const auto llama_names = llama::LlamaConfig::names();
  if (std::find(llama_names.begin(), llama_names.end(), name) != llama_names.end())
    return ModelFamily::llama;
  if (resnet::ResNetConfig::is_name(name)) return ModelFamily::resnet;
  if (swin::SwinConfig::is_name(name)) return ModelFamily::swin;
  std::string valid;
  for (const auto& n : model_names()) valid += (valid.empty() ? "" : ", ") + n;
  fail("unknown model '", name, "' (valid: ", valid, ")");
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
  return swin::SwinConfig::named(name).img_size;
}

double default_drop_path(const std::string& name) {
  return model_family(name) == ModelFamily::swin ? swin::SwinConfig::default_drop_path(name) : 0.0;
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelLayout& layout,
                                  const ModelDataFacts& facts) {
  const ModelLayout full = with_default_groups(name, layout);
  if (model_family(name) == ModelFamily::llama)
    return std::make_unique<llama::LlamaModel>(llama::LlamaConfig::named(name), full);
  const int64_t classes = facts.num_classes > 0 ? facts.num_classes : 10;
  if (model_family(name) == ModelFamily::swin)
    return std::make_unique<swin::SwinModel>(swin::SwinConfig::named(name, classes), full);
  return std::make_unique<resnet::ResNetModel>(resnet::ResNetConfig::named(name, classes), full);
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
    const auto c = llama::LlamaConfig::named(name);
    if (layout.ffn_groups <= 0) layout.ffn_groups = largest_divisor_up_to(4, {c.ffn_dim});
    if (layout.head_groups <= 0) layout.head_groups = largest_divisor_up_to(4, {c.n_kv_heads});
  } else if (model_family(name) == ModelFamily::swin) {
    const auto c = swin::SwinConfig::named(name);
    std::vector<int64_t> units, heads;
    for (int s = 0; s < c.stage_count(); ++s) {
      units.push_back(c.mlp_hidden(s));
      heads.push_back(c.num_heads[static_cast<size_t>(s)]);
    }
    if (layout.ffn_groups <= 0) layout.ffn_groups = largest_divisor_up_to(4, units);
    if (layout.head_groups <= 0) layout.head_groups = largest_divisor_up_to(4, heads);
  } else {
    const auto c = resnet::ResNetConfig::named(name);
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
  return format("of type '", config.is_object() ? config.value("model_type", std::string("?")) : "?",
                "' that matches no named model");
}

std::string model_summary(const std::string& name) {
  if (model_family(name) == ModelFamily::llama) {
    const auto c = llama::LlamaConfig::named(name);
    return format("LLaMA, ", c.n_layers, " blocks, dim ", c.dim, ", ", c.n_heads, " heads (",
                  c.n_kv_heads, " KV), FFN ", c.ffn_dim, ", vocab ", c.vocab, ", ",
                  c.parameter_count() / 1e6, "M parameters");
  }
  if (model_family(name) == ModelFamily::swin) {
    const auto c = swin::SwinConfig::named(name);
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
  const auto c = resnet::ResNetConfig::named(name);
  return format("CIFAR ResNet, ", c.block_count(), " basic blocks, widths ", c.widths[0], "-",
                c.widths[1], "-", c.widths[2], "-", c.widths[3], ", ",
                c.parameter_count() / 1e6, "M parameters at 10 classes");
}

}  // namespace sdp
