#pragma once
// The command-line flags of config fields that more than one app takes
// (sdp-train, sdp-plan, sdp-pipeline): each such field has one flag name
// (with its aliases), one help text and one range check, here, so the apps
// cannot describe or bound a field differently. Each app picks the fields it
// takes and the option group they go in; its own flags stay its own.
#include <initializer_list>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/train/train_config.h"

namespace sdp::app {

// Adds the shared flag of config field `field` (a name of
// SDP_TRAIN_CONFIG_FIELDS or SDP_PARALLEL_SETTINGS_FIELDS, e.g. "batch",
// "plan") to `to` (an app or an option group), bound to that field of
// `config`. Throws std::logic_error for a field without a shared flag.
CLI::Option* add_training_option(CLI::App& to, TrainConfig& config, const std::string& field);

// The same for each of `fields`, in order.
std::vector<CLI::Option*> add_training_options(CLI::App& to, TrainConfig& config,
                                               std::initializer_list<const char*> fields);

// Flags that change one field of the --model spec (models/common/model_spec.h):
// --vocab-size N and --layers L add vocab=N and layers=L to it, so
// `--model mini --vocab-size 1024` trains mini:vocab=1024.
struct ModelFieldFlags {
  int64_t vocab_size = 0;  // 0: not given
  int64_t layers = 0;
};
void add_model_field_flags(CLI::App& to, ModelFieldFlags& flags);
// `model` with the given flags' fields set; throws sdp::Error naming the
// flag where the spec cannot take it (config:PATH).
std::string with_model_field_flags(const std::string& model, const ModelFieldFlags& flags);

// The shared flag of a string field, bound to an app's own variable (an app
// that keeps its own options struct rather than a TrainConfig).
CLI::Option* add_training_option(CLI::App& to, std::string& value, const std::string& field);

}  // namespace sdp::app
