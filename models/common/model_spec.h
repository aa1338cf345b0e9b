#pragma once
// The text that names a model everywhere (--model, a config file's "model",
// sdp_state.json's train_config): a named model, the same with some of its
// sizes replaced, or a Hugging Face LLaMA config.json.
//   mini                      the named model as it is
//   mini:vocab=1024,layers=8  the named model with these fields replaced
//   config:PATH               the LLaMA that PATH (a config.json) describes
// This file only splits the text and reads values; which keys a family takes
// and what they mean belong to its config (llama_config.h, resnet_config.h,
// swin_config.h), and models/registry.h puts the two together.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sdp {

struct ModelSpec {
  std::string name;         // the named model ("" for config:PATH)
  std::string config_path;  // config:PATH ("" otherwise)
  std::vector<std::pair<std::string, std::string>> overrides;  // key, value as written

  // True when the spec is not just a named model.
  bool custom() const { return !config_path.empty() || !overrides.empty(); }
  bool has(const std::string& key) const;
  // The text that parses back to this spec, its overrides in key order: one
  // text per spec, which names the model it builds.
  std::string text() const;

  // Throws sdp::Error naming what is wrong with `text` and the valid forms.
  static ModelSpec parse(const std::string& text);
};

// The forms of a model spec, for help texts and errors.
const char* model_spec_forms();

// `spec` with `key` set to `value` (replacing a value it had): the flags
// that change one field of a model (--vocab-size, --layers). Refuses a
// config:PATH spec, whose fields its file states.
std::string with_model_override(const std::string& spec, const std::string& key,
                                const std::string& value);

// An override's value, checked. Each throws sdp::Error naming the key, the
// value and what is valid.
namespace model_spec {
int64_t positive(const std::string& key, const std::string& value);
double positive_number(const std::string& key, const std::string& value);
bool boolean(const std::string& key, const std::string& value);
// Positive integers separated by '-' ("64-128-256-512": ',' separates
// overrides); `count` entries exactly, or 1 .. max_count when count is 0.
std::vector<int64_t> positive_list(const std::string& key, const std::string& value,
                                   size_t count, size_t max_count = 24);
// An override key the family does not take.
[[noreturn]] void unknown_key(const std::string& model, const std::string& key,
                              const std::vector<std::string>& valid);
}  // namespace model_spec

}  // namespace sdp
