// sdp-train: trains a LLaMA model, a CIFAR ResNet or a Swin Transformer with
// the sdp-engine, in one process or as `mpirun -np N sdp-train ...` (one
// rank per process, MPI found from the launcher's environment).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>

#include "apps/cli_common.h"
#include "apps/sdp-train/options.h"
#include "apps/sdp-train/run.h"
#include "comm/mpi_runtime.h"
#include "engine/checkpoint/atomic_file.h"
#include "engine/core/error.h"
#include "models/llama/llama_config.h"
#include "models/common/model_spec.h"
#include "models/registry.h"

namespace {

int list_models() {
  std::printf("%-12s %6s %7s %6s %6s %6s %7s\n", "model", "dim", "layers", "heads", "kv", "ffn",
              "params");
  for (const auto& name : sdp::llama::LlamaConfig::names()) {
    const auto c = sdp::llama::LlamaConfig::named(name);
    std::printf("%-12s %6lld %7lld %6lld %6lld %6lld %6.1fM\n", name.c_str(),
                static_cast<long long>(c.dim), static_cast<long long>(c.n_layers),
                static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads),
                static_cast<long long>(c.ffn_dim), c.parameter_count() / 1e6);
  }
  std::printf("\nCIFAR ResNets (images; classes from the data):\n");
  for (const auto& name : sdp::model_names())
    if (sdp::model_family(name) == sdp::ModelFamily::resnet)
      std::printf("%-16s %s\n", name.c_str(), sdp::model_summary(name).c_str());
  std::printf("\nCIFAR Swin Transformers (images; classes from the data):\n");
  for (const auto& name : sdp::model_names())
    if (sdp::model_family(name) == sdp::ModelFamily::swin)
      std::printf("%-16s %s\n", name.c_str(), sdp::model_summary(name).c_str());
  std::printf("\nCustom models (--model): %s\n", sdp::model_spec_forms());
  return 0;
}

// What the run printed is part of what it delivers (the final report):
// output lost to a full disk or a closed pipe behind a redirection is an
// error and a non-zero exit, not a silent success. `rc` is the run's status.
int check_output_delivered(int rc) {
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  const int err = errno;
  if (flush_failed || std::ferror(stdout)) {
    std::fprintf(stderr, "sdp-train: error: cannot write the report to standard output: %s\n",
                 std::strerror(err ? err : EIO));
    return rc != 0 ? rc : 2;
  }
  if (std::ferror(stderr)) return rc != 0 ? rc : 2;  // warnings or errors went missing
  return rc;
}

// The exit status of a run that failed with `e`: sdp::kExitPermanentError
// (3) for an error that running the job again cannot cure, which
// scripts/sdp-run therefore does not retry: configuration and flags, a save
// directory that cannot be written or that another job holds, a full disk,
// a corrupted checkpoint. 2 for any other error.
int exit_status_of(const std::exception& e) {
  if (dynamic_cast<const sdp::PermanentError*>(&e)) return sdp::kExitPermanentError;
  if (const auto* collective = dynamic_cast<const sdp::CollectiveError*>(&e))
    return collective->permanent() ? sdp::kExitPermanentError : 2;
  // std::filesystem_error is one too: a directory the library could not make.
  if (const auto* system = dynamic_cast<const std::system_error*>(&e))
    if ((system->code().category() == std::generic_category() ||
         system->code().category() == std::system_category()) &&
        sdp::checkpoint::is_permanent_errno(system->code().value()))
      return sdp::kExitPermanentError;
  return 2;
}

// The configuration from defaults, --config and flags; any error in them is
// one a restart cannot cure. The model name is checked here too, so that a
// misspelt one is refused as configuration, not later when the model is built.
sdp::TrainConfig resolve_config_or_fail(const CLI::App& app,
                                        const sdp::app::CliOptions& options) {
  try {
    sdp::TrainConfig config = sdp::app::resolve_config(app, options);
    sdp::model_summary(config.model);  // the whole spec: its keys, values, config.json
    return config;
  } catch (const sdp::PermanentError&) {
    throw;
  } catch (const sdp::Error& e) {
    throw sdp::PermanentError(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  using sdp::comm::MpiRuntime;
  CLI::App app{
      "sdp-train: train LLaMA models, CIFAR ResNets and Swin Transformers with the sdp-engine "
      "(DDP and Subnetwork Data Parallelism).\nFields come from defaults, then --config FILE "
      "(JSON), then flags. Multi-rank: mpirun -np N sdp-train ..."};
  app.get_formatter()->column_width(34);
  // --help shows each flag's default beside its text.
  app.option_defaults()->always_capture_default();
  sdp::app::CliOptions options;
  sdp::app::add_options(app, options);
  sdp::app::add_version_flag(app, "sdp-train");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end with 0; a bad flag is a permanent error.
    return sdp::app::report_parse_error(app, "sdp-train", e) == 0 ? 0
                                                                  : sdp::kExitPermanentError;
  }
  // Every rank parses the same flags: only rank 0 reports what they all see.
  std::optional<MpiRuntime> mpi;
  int rank = 0;
  try {
    if (MpiRuntime::launched_by_mpi()) {
      mpi.emplace(argc, argv);
      rank = MpiRuntime::rank();
    }
    if (options.list_models) return check_output_delivered(rank == 0 ? list_models() : 0);
    const sdp::TrainConfig config = resolve_config_or_fail(app, options);
    if (options.print_config) {
      if (rank == 0) std::printf("%s\n", config.to_json().dump(2).c_str());
      return check_output_delivered(0);
    }
    return check_output_delivered(
        sdp::app::run_training(config, options.dry_run, mpi.has_value()));
  } catch (const std::bad_alloc&) {
    // Sizes known up front are checked where they are set; this is memory
    // that ran out elsewhere (the host's, for containers outside the
    // allocators), reported without the bare library text.
    std::fprintf(stderr,
                 "sdp-train: %serror: out of host memory (an allocation outside the engine's "
                 "allocators failed); a smaller model, --batch, --seq, --emulate-world or "
                 "world, or more free memory, is needed\n",
                 rank == 0 ? "" : ("[rank " + std::to_string(rank) + "] ").c_str());
    if (mpi && MpiRuntime::size() > 1) MpiRuntime::abort_job(2);
    return 2;
  } catch (const sdp::CollectiveError& e) {
    // Every rank failed alike at the same point: one report, a clean end.
    if (rank == 0) std::fprintf(stderr, "sdp-train: error: %s\n", e.what());
    return exit_status_of(e);
  } catch (const std::exception& e) {
    if (rank == 0) {
      std::fprintf(stderr, "sdp-train: error: %s\n", e.what());
    } else {
      std::fprintf(stderr, "sdp-train: [rank %d] error: %s\n", rank, e.what());
    }
    // A rank that fails alone must not leave the others waiting in a
    // collective: end the whole job (mpirun exits with this status).
    const int status = exit_status_of(e);
    if (mpi && MpiRuntime::size() > 1) MpiRuntime::abort_job(status);
    return status;
  }
}
