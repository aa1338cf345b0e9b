#include "apps/sdp-train/run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/sdp-train/accuracy_report.h"
#include "apps/sdp-train/fault_hook.h"
#include "apps/sdp-train/pipeline_report.h"
#include "apps/sdp-train/rank_report.h"
#include "apps/sdp-train/step_report.h"
#include "apps/sdp-train/thread_setup.h"
#include "comm/communicator.h"
#include "engine/checkpoint/output_path.h"
#include "engine/checkpoint/save_dir_lock.h"
#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/metrics/memory_report.h"
#include "engine/metrics/metrics_log.h"
#include "engine/parallel/world_fit.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"

namespace sdp::app {

namespace {

void print_memory_table(const MemorySnapshot& memory) {
  std::printf("%-12s %14s\n", "category", "at peak");
  for (size_t i = 0; i < kMemCategoryCount; ++i) {
    const auto c = static_cast<MemCategory>(i);
    const std::string name(category_name(c));
    std::printf("%-12s %14s\n", name.c_str(),
                human_bytes(static_cast<double>(memory.at_peak[c])).c_str());
  }
  std::printf("%-12s %14s\n", "total peak",
              human_bytes(static_cast<double>(memory.peak_total)).c_str());
  for (Phase p : kPhasesByName)
    std::printf("  peak in %-14s %12s\n", std::string(phase_name(p)).c_str(),
                human_bytes(static_cast<double>(memory.phase_peak[p])).c_str());
  if (memory.reserved)
    std::printf("%-12s %14s (cached blocks included)\n", "reserved peak",
                human_bytes(static_cast<double>(memory.reserved->peak)).c_str());
  if (memory.device) {
    const double total = static_cast<double>(memory.device->total_bytes);
    std::printf("%-12s %14s of %s (cudaMemGetInfo: every process and library)\n", "device used",
                human_bytes(total - static_cast<double>(memory.device->free_bytes)).c_str(),
                human_bytes(total).c_str());
  }
}

// The process that prints and writes metrics: rank 0 of a real job, or the
// one process of a single or emulated run (whatever rank it emulates).
bool reports(const Trainer& trainer) {
  return trainer.world().rank() == 0 || !trainer.world().moves_data();
}

// "batch 8 x seq 64 tokens" or "batch 128 images".
std::string batch_text(const TrainConfig& config, const BatchLoader& data) {
  if (std::string(data.unit()) == "images") return format("batch ", config.batch, " images");
  return format("batch ", config.batch, " x seq ", config.seq, " tokens");
}

std::unique_ptr<Trainer> make_trainer(const TrainConfig& config, comm::Communicator* world) {
  return world ? std::make_unique<Trainer>(config, *world) : std::make_unique<Trainer>(config);
}

int dry_run(const TrainConfig& config, comm::Communicator* world) {
  auto trainer = make_trainer(config, world);
  const Model& model = trainer->model();
  const bool root = reports(*trainer);
  const StepResult r = trainer->train_step();
  const RankFigures figures = gather_rank_figures(trainer->world(), r);
  if (!root) return 0;
  if (const auto shortfall = ownership_shortfall(config.parallel, trainer->layout().plan))
    std::fprintf(stderr, "sdp-train: warning: %s\n", shortfall->c_str());
  if (const std::string cover = trainer->layout().plan.coverage_warning(
          trainer->layout().component_names);
      !cover.empty())
    std::fprintf(stderr, "sdp-train: %s", cover.c_str());
  std::printf("dry run on the meta device: %s (%.1fM parameters), %s, "
              "grad_accum %lld, dtype %s, %s, rank %d of %d\n",
              model.name().c_str(), model.parameter_count() / 1e6,
              batch_text(config, trainer->train_data()).c_str(),
              static_cast<long long>(config.grad_accum),
              config.dtype.c_str(), trainer->layout().describe().c_str(),
              trainer->world().rank(), trainer->world().size());
  print_memory_table(r.memory);
  print_rank_figures(figures);
  if (!config.metrics.empty()) {
    MetricsLog log(config.metrics);
    log.write({{"dry_run", true}, {"model", model.name()}, {"parameters", model.parameter_count()},
               {"batch", config.batch}, {"seq", config.seq}, {"memory", r.memory.to_json()},
               {"comm", r.comm.to_json()}, {"ranks", figures.to_json()},
               {"parallel", trainer->layout().to_json()}});
    log.close();
  }
  return 0;
}

// A resumed run continues its metrics file from the resumed step: the
// records the failed attempt wrote after its last checkpoint are removed
// (that attempt repeats those steps), so every step appears once.
// Returns what it kept of the last `recent` steps (their losses, records).
MetricsTrim continue_metrics(const std::filesystem::path& path, int64_t resumed_step,
                             size_t recent) {
  const MetricsTrim trim = keep_records_through_step(path, resumed_step, recent);
  if (trim.dropped > 0 || trim.dropped_cut_line)
    std::printf("metrics: %s continues after step %lld: removed %lld record%s of later steps%s\n",
                path.c_str(), static_cast<long long>(resumed_step),
                static_cast<long long>(trim.dropped), trim.dropped == 1 ? "" : "s",
                trim.dropped_cut_line ? " and a cut-off last line" : "");
  if (trim.last_step && *trim.last_step < resumed_step)
    std::fprintf(stderr,
                 "sdp-train: warning: metrics file %s ends at step %lld but the run resumes "
                 "after step %lld: steps %lld..%lld have no record\n",
                 path.c_str(), static_cast<long long>(*trim.last_step),
                 static_cast<long long>(resumed_step), static_cast<long long>(*trim.last_step + 1),
                 static_cast<long long>(resumed_step));
  return trim;
}

// The paths a run writes, each with its flag: a dry run writes only its
// metrics.
std::vector<checkpoint::OutputPath> run_outputs(const TrainConfig& config, bool dry) {
  std::vector<checkpoint::OutputPath> outputs = {{"--metrics", "metrics file", config.metrics}};
  if (dry) return outputs;
  outputs.push_back({"--save-dir", "save directory", config.save_dir, true});
  outputs.push_back(
      {"--pipeline-timeline", "timeline directory", config.pipeline_timeline, true});
  return outputs;
}

// Before any training: rank 0 checks that every output path can be written
// (output_path.h), then that the save directory can be written, and takes
// its lock for the job's lifetime (save_dir_lock.h), so that a read-only or
// full directory, a path through a file, or a save directory another job is
// saving into, fails now rather than after the steps it was to record. Every
// rank learns the outcome, so a refused job ends on every rank with rank
// 0's message, and as a permanent error where it is one (sdp-run does not
// restart it).
std::unique_ptr<checkpoint::SaveDirLock> prepare_outputs(const TrainConfig& config, bool dry,
                                                         comm::Communicator* world) {
  const bool rank0 = !world || world->rank() == 0;
  std::unique_ptr<checkpoint::SaveDirLock> lock;
  std::string error;
  bool permanent = true;
  if (rank0) {
    try {
      checkpoint::check_output_paths(run_outputs(config, dry));
      if (!dry && !config.save_dir.empty())
        lock = std::make_unique<checkpoint::SaveDirLock>(config.save_dir);
    } catch (const PermanentError& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = e.what();
      permanent = false;
    }
  }
  if (world && world->size() > 1) {
    int32_t status = error.empty() ? 0 : permanent ? 2 : 1;  // rank 0's
    Tensor t(&status, {1}, DType::i32, Device::cpu);
    world->broadcast(t, 0);
    if (!rank0 && status != 0)
      throw CollectiveError("rank 0 could not prepare the output paths (its message says why)",
                            status == 2);
  }
  if (!error.empty()) throw CollectiveError(error, permanent);
  return lock;
}

}  // namespace

int run_training(const TrainConfig& config, bool dry, bool use_mpi) {
  std::unique_ptr<comm::Communicator> mpi_world;
  comm::CommOptions options;
  options.timeout_seconds = config.comm_timeout;
  // CUDA runs reduce device buffers through NCCL, one rank or many: the same
  // code path on a single GPU as in an N-rank job (an emulated rank keeps
  // its own emulated world).
  const bool on_gpus = config.device == "cuda" && config.emulate_world == 0 && !dry;
  // A lone process's world is known before any GPU is looked for: a config
  // written for 4 ranks is refused for what it is on any machine.
  if (on_gpus && !use_mpi)
    if (const auto mismatch = world_mismatch(config.world, 1))
      throw CollectiveError(*mismatch, true);
  if (on_gpus) {
    Trainer::require_device(config.device);  // a clear message when no GPU is usable
    mpi_world = comm::make_world("nccl", options);
  }
  else if (use_mpi)
    mpi_world = comm::make_world("mpi", options);
  // A config written for another world (sdp-plan --write-config) is refused
  // by every rank alike before anything runs.
  const int job_world = config.emulate_world > 0 ? static_cast<int>(config.emulate_world)
                        : mpi_world                ? mpi_world->size()
                                                   : 1;
  if (const auto mismatch = world_mismatch(config.world, job_world))
    throw CollectiveError(*mismatch, true);
  const auto save_dir_lock = prepare_outputs(config, dry, mpi_world.get());
  if (dry) return dry_run(config, mpi_world.get());
  // Collective; set before the trainer is built, printed once training starts.
  const ThreadChoice threads = set_run_threads(config, mpi_world.get());
  const FaultHook fault_hook = FaultHook::from_environment();
  auto trainer_ptr = make_trainer(config, mpi_world.get());
  Trainer& trainer = *trainer_ptr;
  // Rank 0 prints and writes metrics; the other ranks only report errors.
  const bool root = reports(trainer);
  auto say = [root](auto... args) {
    if (root) std::printf(args...);
  };
  if (!config.resume.empty()) {
    const auto dir = resolve_checkpoint(config.resume);
    // Whatever makes a checkpoint unloadable (a corrupted file, an index
    // that contradicts its files, ranks that read different ones) fails the
    // same way on a restart: a permanent error, which sdp-run does not retry.
    try {
      trainer.load_checkpoint(dir);
    } catch (const CollectiveError& e) {
      if (e.permanent()) throw;
      throw CollectiveError(e.what(), true);
    } catch (const PermanentError&) {
      throw;
    } catch (const Error& e) {
      throw PermanentError(e.what());
    }
    // Every rank resumed the same step (the ranks agree on the checkpoint).
    if (trainer.step() > config.steps)
      throw CollectiveError(
          format("steps = ", config.steps, " (--steps) is below the step of the checkpoint it "
                 "resumes, ", dir.string(), " at step ", trainer.step(), ": there is nothing to "
                 "train (valid: steps >= ", trainer.step(), "; steps counts from the start of "
                 "the run, not from the checkpoint)"),
          true);
    say("resumed from %s at step %lld\n", dir.c_str(), static_cast<long long>(trainer.step()));
  }
  const Model& model = trainer.model();
  const auto best = trainer.best_achievable_loss();
  const int world = trainer.world().size();
  const std::string unit = trainer.train_data().unit();
  const char* unit_short = unit == "images" ? "img/s" : "tok/s";
  say("%s\n", threads.message.c_str());
  say("sdp-train: %s (%.2fM parameters) on %s, %s %s, %s on %d rank%s (%s), "
      "grad_accum %lld x %s per rank, %lld steps\n",
      model.name().c_str(), model.parameter_count() / 1e6,
      trainer.train_data().describe().c_str(), config.device.c_str(), config.dtype.c_str(),
      trainer.layout().describe().c_str(), world, world == 1 ? "" : "s",
      std::string(trainer.world().backend()).c_str(), static_cast<long long>(config.grad_accum),
      batch_text(config, trainer.train_data()).c_str(), static_cast<long long>(config.steps));
  if (world > 1 && config.parallel.subnetworks()) say("%s", plan_text(trainer).c_str());
  // A world too small for the C asked for trains no subnetworks, or trains
  // components on one rank's data alone: said loudly, once.
  if (root) {
    if (const auto shortfall = ownership_shortfall(config.parallel, trainer.layout().plan))
      std::fprintf(stderr, "sdp-train: warning: %s\n", shortfall->c_str());
    // A neuron plan whose ranks miss a sublayer (C too small for them all).
    if (const std::string cover =
            trainer.layout().plan.coverage_warning(trainer.layout().component_names);
        !cover.empty())
      std::fprintf(stderr, "sdp-train: %s", cover.c_str());
  }
  if (trainer.layout().pipelined()) say("%s", pipeline_text(trainer).c_str());
  // Every job's step is a schedule (one stage without a pipeline).
  if (root && !config.pipeline_timeline.empty())
    std::printf("%s", draw_schedule(trainer, config.pipeline_timeline).c_str());
  if (best) say("best achievable loss on this data: %.4f nats/token\n", *best);
  const std::string per_s = unit + "_per_s";

  // The final train loss is the mean over the last kRecentSteps steps; a
  // resumed run takes the steps before its restart from its metrics file,
  // so its summary equals an uninterrupted run's.
  constexpr size_t kRecentSteps = 10;
  std::vector<double> recent;
  RecentAccuracy recent_accuracy(model.accuracy_top_k(), kRecentSteps);  // classifiers
  std::optional<MetricsLog> metrics;
  if (root && !config.metrics.empty()) {
    if (!config.resume.empty()) {
      const MetricsTrim kept = continue_metrics(config.metrics, trainer.step(), kRecentSteps);
      recent = kept.recent_losses;
      recent_accuracy.resume(kept.recent_records);
    }
    metrics.emplace(config.metrics, !config.resume.empty());
  }
  auto log_line = [&](const nlohmann::json& j) {
    if (metrics) metrics->write(j);
  };
  StepReport progress(config, root, trainer.step(), unit_short);
  if (root) std::fflush(stdout);  // a redirected log holds the start-up report before step 1
  double timed_seconds = 0;
  int64_t timed_examples = 0, timed_steps = 0;
  const int64_t first_step = trainer.step();
  double last_eval = NAN;
  std::optional<MemorySnapshot> last_memory;
  // Under forward masking each rank's own subnetwork is a model of its own.
  // A pipeline stage is no network of its own: no subnetwork losses there.
  const bool forward_masked = world > 1 && trainer.layout().spec.masking == Masking::forward &&
                              config.parallel.subnetworks() && !trainer.layout().pipelined();
  RankFigures last_figures;
  EvalResult last_eval_all;
  while (trainer.step() < config.steps) {
    const StepResult r = trainer.train_step();
    // Collective: every rank's peak memory and traffic of this step.
    last_figures = gather_rank_figures(trainer.world(), r);
    // The first steps warm caches and the allocator: throughput excludes them.
    if (r.step - first_step > 2) {
      timed_seconds += r.seconds;
      timed_examples += r.examples;
      ++timed_steps;
    }
    recent.push_back(r.loss);
    if (recent.size() > kRecentSteps) recent.erase(recent.begin());
    recent_accuracy.add(r.accuracy);
    last_memory = r.memory;
    nlohmann::json line = {{"step", r.step},         {"loss", r.loss},
                           {"lr", r.lr},             {"grad_norm", r.grad_norm},
                           {unit, r.examples},       {"seconds", r.seconds},
                           {per_s, r.examples / r.seconds}, {"flops", r.flops},
                           {"memory", r.memory.to_json()}, {"comm", r.comm.to_json()},
                           {"skipped_steps", r.skipped_steps}};
    write_train_accuracy(line, r);
    if (r.pipeline) line["pipeline"] = r.pipeline->to_json();
    if (r.skipped) {
      line["skipped"] = true;
      if (root) {
        progress.finish();
        std::fprintf(stderr,
                     "sdp-train: warning: step %lld skipped (no update): loss %g, gradient norm "
                     "%g; %lld of --skip-nonfinite %lld skipped so far\n",
                     static_cast<long long>(r.step), r.loss, r.grad_norm,
                     static_cast<long long>(r.skipped_steps),
                     static_cast<long long>(config.skip_nonfinite));
      }
    }
    if (world > 1) line["ranks"] = last_figures.to_json();
    const bool eval_now = config.eval_every > 0 &&
                          (r.step % config.eval_every == 0 || r.step == config.steps);
    if (eval_now) {
      last_eval_all = trainer.evaluate_all();
      last_eval = last_eval_all.full_loss;
      line["eval_loss"] = last_eval;
      if (world > 1) line["eval_subnet_loss"] = last_eval_all.subnet_loss;
      write_eval_accuracy(line, "eval_", last_eval_all, world > 1);
    }
    log_line(line);
    progress.step(r, last_figures);
    if (eval_now && root) {
      progress.finish();
      // Classifiers add their top-k accuracies after each loss.
      std::printf("step %5lld  train loss %.4f%s  eval loss %.4f%s",
                  static_cast<long long>(r.step), r.loss, accuracy_suffix(r.accuracy).c_str(),
                  last_eval, accuracy_suffix(last_eval_all.full_accuracy).c_str());
      if (forward_masked) {
        const auto [lo, hi] = std::minmax_element(last_eval_all.subnet_loss.begin(),
                                                  last_eval_all.subnet_loss.end());
        std::printf("  subnets %.4f..%.4f%s", *lo, *hi,
                    subnet_accuracy_range(last_eval_all.subnet_accuracy).c_str());
      }
      if (best) std::printf("  (best achievable %.4f)", *best);
      std::printf("\n");
      std::fflush(stdout);  // a redirected log shows it now, not at exit
    }
    const bool save_now = !config.save_dir.empty() &&
                          ((config.save_every > 0 && r.step % config.save_every == 0) ||
                           r.step == config.steps);
    if (save_now) save_and_mark_latest(trainer, config.save_dir);
    fault_hook.after_step(r.step, trainer.world().rank());
  }
  progress.finish();
  if (!config.pipeline_timeline.empty() && trainer.step() > first_step) {
    const std::string text = write_measured_timeline(trainer, config.pipeline_timeline);
    if (root) std::printf("%s", text.c_str());
  }

  double final_loss = 0;
  for (double l : recent) final_loss += l;
  final_loss = recent.empty() ? NAN : final_loss / static_cast<double>(recent.size());
  nlohmann::json summary = {
      {"summary", true},
      {"steps", trainer.step()},
      {"skipped_steps", trainer.skipped_steps()},
      {"final_train_loss", final_loss},
      {"final_eval_loss", last_eval},
      {per_s, timed_steps ? timed_examples / timed_seconds : NAN},
      {"parameters", model.parameter_count()},
      {"config", config.to_json()},
      {"memory", last_memory ? last_memory->to_json() : nlohmann::json()},
      {"parallel", trainer.layout().to_json()}};
  if (world > 1) {
    summary["ranks"] = last_figures.to_json();
    summary["eval_subnet_loss"] = last_eval_all.subnet_loss;
  }
  // Classifiers: train accuracy over the same last steps as the loss, and
  // the last evaluation's (null when the run evaluated none).
  const TopKAccuracy final_train_accuracy = recent_accuracy.mean();
  final_train_accuracy.write(summary, "final_train_");
  if (last_eval_all.full_accuracy.empty())
    last_eval_all.full_accuracy = TopKAccuracy::unknown(model.evaluation_top_k());
  write_eval_accuracy(summary, "final_eval_", last_eval_all, world > 1);
  if (best) summary["best_achievable_loss"] = *best;
  log_line(summary);
  if (metrics) metrics->close();  // reports a write that only the close sees failing
  if (!root) return 0;

  std::printf("\n%-28s %.4f\n", "final train loss (last 10)", final_loss);
  if (!std::isnan(last_eval)) std::printf("%-28s %.4f\n", "final eval loss", last_eval);
  if (forward_masked && !last_eval_all.subnet_loss.empty()) {
    std::printf("%-28s", "final subnet eval losses");
    for (double l : last_eval_all.subnet_loss) std::printf(" %.4f", l);
    std::printf("\n");
  }
  print_final_accuracy(final_train_accuracy, kRecentSteps, last_eval_all, forward_masked);
  if (best) {
    std::printf("%-28s %.4f\n", "best achievable loss", *best);
    if (!std::isnan(last_eval))
      std::printf("%-28s %.4f nats/token\n", "gap to best", last_eval - *best);
  }
  if (timed_steps)
    std::printf("%-28s %.0f\n", (unit + "/s").c_str(), timed_examples / timed_seconds);
  if (last_memory) {
    std::printf("memory of the last step%s:\n", world > 1 ? " (rank 0)" : "");
    print_memory_table(*last_memory);
  }
  if (world > 1) print_rank_figures(last_figures);
  return 0;
}

}  // namespace sdp::app
