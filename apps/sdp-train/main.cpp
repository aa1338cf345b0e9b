// sdp-train: trains a LLaMA model with the sdp-engine (single process for
// now; the distributed strategies arrive with the communicator).
#include <cstdio>

#include <CLI/CLI.hpp>

#include "apps/sdp-train/options.h"
#include "apps/sdp-train/run.h"
#include "engine/core/error.h"
#include "models/llama/llama_config.h"

int main(int argc, char** argv) {
  CLI::App app{
      "sdp-train: train LLaMA models with the sdp-engine.\n"
      "Fields come from defaults, then --config FILE (JSON), then flags."};
  app.get_formatter()->column_width(34);
  sdp::app::CliOptions options;
  sdp::app::add_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    if (options.list_models) {
      std::printf("%-12s %6s %7s %6s %6s %6s %7s\n", "model", "dim", "layers", "heads", "kv", "ffn",
                  "params");
      for (const auto& name : sdp::llama::LlamaConfig::names()) {
        const auto c = sdp::llama::LlamaConfig::named(name);
        std::printf("%-12s %6lld %7lld %6lld %6lld %6lld %6.1fM\n", name.c_str(),
                    static_cast<long long>(c.dim), static_cast<long long>(c.n_layers),
                    static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads),
                    static_cast<long long>(c.ffn_dim), c.parameter_count() / 1e6);
      }
      return 0;
    }
    const sdp::TrainConfig config = sdp::app::resolve_config(app, options);
    if (options.print_config) {
      std::printf("%s\n", config.to_json().dump(2).c_str());
      return 0;
    }
    return sdp::app::run_training(config, options.dry_run);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sdp-train: error: %s\n", e.what());
    return 2;
  }
}
