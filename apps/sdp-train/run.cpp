#include "apps/sdp-train/run.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <vector>

#include "engine/core/error.h"
#include "engine/metrics/memory_report.h"
#include "engine/metrics/metrics_log.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"

namespace sdp::app {

namespace {

void print_memory_table(const nlohmann::json& memory) {
  std::printf("%-12s %14s\n", "category", "at peak");
  for (size_t i = 0; i < kMemCategoryCount; ++i) {
    const std::string name(category_name(static_cast<MemCategory>(i)));
    const double bytes = memory["peak"]["at_peak"][name].get<double>();
    std::printf("%-12s %14s\n", name.c_str(), human_bytes(bytes).c_str());
  }
  std::printf("%-12s %14s\n", "total peak",
              human_bytes(memory["peak"]["total"].get<double>()).c_str());
  for (const auto& [phase, bytes] : memory["phase_peak"].items())
    std::printf("  peak in %-14s %12s\n", phase.c_str(), human_bytes(bytes.get<double>()).c_str());
}

int dry_run(const TrainConfig& config) {
  Trainer trainer(config);
  const auto& mc = trainer.model().config();
  std::printf("dry run on the meta device: %s (%.1fM parameters), batch %lld x seq %lld, "
              "grad_accum %lld, dtype %s\n",
              mc.name.c_str(), mc.parameter_count() / 1e6, static_cast<long long>(config.batch),
              static_cast<long long>(config.seq), static_cast<long long>(config.grad_accum),
              config.dtype.c_str());
  const StepResult r = trainer.train_step();
  print_memory_table(r.memory);
  if (!config.metrics.empty()) {
    MetricsLog log(config.metrics);
    log.write({{"dry_run", true}, {"model", mc.name}, {"parameters", mc.parameter_count()},
               {"batch", config.batch}, {"seq", config.seq}, {"memory", r.memory}});
  }
  return 0;
}

}  // namespace

int run_training(const TrainConfig& config, bool dry) {
  if (dry) return dry_run(config);
  Trainer trainer(config);
  if (!config.resume.empty()) {
    const auto dir = resolve_checkpoint(config.resume);
    trainer.load_checkpoint(dir);
    std::printf("resumed from %s at step %lld\n", dir.c_str(),
                static_cast<long long>(trainer.step()));
  }
  const auto& mc = trainer.model().config();
  const auto best = trainer.best_achievable_loss();
  std::printf("sdp-train: %s (%.2fM parameters) on %s, %s %s, batch %lld x %lld x %lld tokens, "
              "%lld steps\n",
              mc.name.c_str(), mc.parameter_count() / 1e6, trainer.train_data().describe().c_str(),
              config.device.c_str(), config.dtype.c_str(), static_cast<long long>(config.grad_accum),
              static_cast<long long>(config.batch), static_cast<long long>(config.seq),
              static_cast<long long>(config.steps));
  if (best) std::printf("best achievable loss on this data: %.4f nats/token\n", *best);

  std::optional<MetricsLog> metrics;
  if (!config.metrics.empty()) metrics.emplace(config.metrics, !config.resume.empty());
  auto log_line = [&](const nlohmann::json& j) {
    if (metrics) metrics->write(j);
  };
  ProgressLine progress(config.progress);
  double timed_seconds = 0;
  int64_t timed_tokens = 0, timed_steps = 0;
  const int64_t first_step = trainer.step();
  std::vector<double> recent;
  double last_eval = NAN;
  nlohmann::json last_memory;
  while (trainer.step() < config.steps) {
    const StepResult r = trainer.train_step();
    // The first steps warm caches and the allocator: throughput excludes them.
    if (r.step - first_step > 2) {
      timed_seconds += r.seconds;
      timed_tokens += r.tokens;
      ++timed_steps;
    }
    recent.push_back(r.loss);
    if (recent.size() > 10) recent.erase(recent.begin());
    last_memory = r.memory;
    nlohmann::json line = {{"step", r.step},         {"loss", r.loss},
                           {"lr", r.lr},             {"grad_norm", r.grad_norm},
                           {"tokens", r.tokens},     {"seconds", r.seconds},
                           {"tokens_per_s", r.tokens / r.seconds}, {"memory", r.memory}};
    const bool eval_now = config.eval_every > 0 &&
                          (r.step % config.eval_every == 0 || r.step == config.steps);
    if (eval_now) {
      last_eval = trainer.evaluate();
      line["eval_loss"] = last_eval;
    }
    log_line(line);
    char text[200];
    std::snprintf(text, sizeof text, "step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s",
                  static_cast<long long>(r.step), static_cast<long long>(config.steps), r.loss,
                  r.lr, r.tokens / r.seconds);
    progress.update(text);
    if (eval_now) {
      progress.finish();
      std::printf("step %5lld  train loss %.4f  eval loss %.4f", static_cast<long long>(r.step),
                  r.loss, last_eval);
      if (best) std::printf("  (best achievable %.4f)", *best);
      std::printf("\n");
    }
    const bool save_now = !config.save_dir.empty() &&
                          ((config.save_every > 0 && r.step % config.save_every == 0) ||
                           r.step == config.steps);
    if (save_now) save_and_mark_latest(trainer, config.save_dir);
  }
  progress.finish();

  double final_loss = 0;
  for (double l : recent) final_loss += l;
  final_loss = recent.empty() ? NAN : final_loss / static_cast<double>(recent.size());
  nlohmann::json summary = {
      {"summary", true},
      {"steps", trainer.step()},
      {"final_train_loss", final_loss},
      {"final_eval_loss", last_eval},
      {"tokens_per_s", timed_steps ? timed_tokens / timed_seconds : NAN},
      {"parameters", mc.parameter_count()},
      {"config", config.to_json()},
      {"memory", last_memory}};
  if (best) summary["best_achievable_loss"] = *best;
  log_line(summary);

  std::printf("\n%-28s %.4f\n", "final train loss (last 10)", final_loss);
  if (!std::isnan(last_eval)) std::printf("%-28s %.4f\n", "final eval loss", last_eval);
  if (best) {
    std::printf("%-28s %.4f\n", "best achievable loss", *best);
    if (!std::isnan(last_eval))
      std::printf("%-28s %.4f nats/token\n", "gap to best", last_eval - *best);
  }
  if (timed_steps)
    std::printf("%-28s %.0f\n", "tokens/s", timed_tokens / timed_seconds);
  if (!last_memory.is_null()) {
    std::printf("memory of the last step:\n");
    print_memory_table(last_memory);
  }
  return 0;
}

}  // namespace sdp::app
