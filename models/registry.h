#pragma once
// Models by name, across families: the LLaMA language models
// (llama_config.h), the CIFAR ResNets (resnet_config.h) and the CIFAR Swin
// Transformers (swin_config.h). The trainer,
// the strategies and the apps build models only through here.
// Every `name` below is a model spec (models/common/model_spec.h): a named
// model, a named model with fields replaced (mini:vocab=1024,layers=8), or a
// Hugging Face LLaMA config.json (config:PATH).
#include <memory>
#include <string>
#include <vector>

#include "models/common/component.h"
#include "models/common/model.h"
#include "models/llama/llama_config.h"

namespace sdp {

enum class ModelFamily { llama, resnet, swin };

// Image classifiers (ResNet, Swin) read images [B, C, H, W] and labels [B];
// the rest read tokens.
bool is_image_family(ModelFamily family);
bool is_image_model(const std::string& name);
// The square image side a named model requires (a Swin's img_size: its
// patch grid and windows are fixed), or 0 when any size works (the ResNets
// pool globally) or the model reads tokens.
int64_t required_image_size(const std::string& name);

// What the data tells a model that its name does not: the classes of an
// image data set (0 = the model's default).
struct ModelDataFacts {
  int64_t num_classes = 0;
};

// Every valid name, LLaMA first, then ResNets, then Swins.
std::vector<std::string> model_names();
// Throws sdp::Error listing the valid names for an unknown one.
ModelFamily model_family(const std::string& name);

// The LLaMA a spec describes; throws sdp::Error for another family, an
// unknown key, a bad value, or a config.json that is not a LLaMA.
llama::LlamaConfig llama_config(const std::string& name);

// The spec a training run records (sdp_state.json's train_config.model), so
// that resuming and sdp-export build the same model without the data or the
// working directory: a custom LLaMA without a vocab key takes the data's
// vocabulary (`data_vocab`, 0 = none), and config:PATH an absolute path. A
// named model without overrides is returned as it is.
std::string resolved_model_spec(const std::string& name, int64_t data_vocab);
const char* model_family_name(ModelFamily family);

// The model's declarations (parameters, components, storage groups) under
// `layout`; nothing is allocated until materialize().
std::unique_ptr<Model> make_model(const std::string& name, const ModelLayout& layout = {},
                                  const ModelDataFacts& facts = {});

// Neuron-level group counts the model supports by default: for every count
// the layout leaves at 0, the largest value up to 4 (LLaMA FFN units, KV
// heads; Swin MLP units and heads of every stage) or 8 (ResNet inner
// channels) that divides what is split.
ModelLayout with_default_groups(const std::string& name, ModelLayout layout);

// The architecture fields of a model config (config.json): without the
// dtype of the stored tensors, the data's special token ids,
// transformers-only fields that do not change the network, and training
// settings (a Swin's drop_path_rate). Two configs
// describe the same network exactly when these are equal.
nlohmann::json model_architecture(const nlohmann::json& config);

// Which named model a checkpoint's config.json describes ("tiny (0.1M
// parameters)"), the custom spec its name records, or its model_type when it
// matches none.
std::string describe_model_config(const nlohmann::json& config);

// The stochastic depth rate a named model trains with by default (Swin-T's
// recipe for swin-t; 0 for models without stochastic depth).
double default_drop_path(const std::string& name);

// A one-line description of a named model for --help.
std::string model_summary(const std::string& name);

}  // namespace sdp
