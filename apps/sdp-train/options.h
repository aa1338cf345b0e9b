#pragma once
// Command-line options of sdp-train: every TrainConfig field has a flag with
// its documentation; a JSON --config file supplies defaults that flags
// override.
#include <CLI/CLI.hpp>

#include "apps/training_options.h"
#include "engine/train/train_config.h"

namespace sdp::app {

struct CliOptions {
  TrainConfig flags;             // values given on the command line
  std::string config_file;       // --config
  bool list_models = false;      // --list-models
  bool print_config = false;     // --print-config
  bool dry_run = false;          // --dry-run: one step on the meta device
  ModelFieldFlags model_fields;  // --vocab-size, --layers: fields of the --model spec
};

// Declares every flag on `app`, bound to `opts`.
void add_options(CLI::App& app, CliOptions& opts);

// The effective config: defaults, then the --config file, then every flag
// that was given. Validated before it is returned.
TrainConfig resolve_config(const CLI::App& app, const CliOptions& opts);

}  // namespace sdp::app
