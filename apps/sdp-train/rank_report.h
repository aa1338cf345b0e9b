#pragma once
// Per-rank figures of a step gathered to every rank (rank 0 prints and logs
// them): peak memory and bytes sent differ between the ranks of an SDP plan.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "engine/train/trainer.h"

namespace sdp::app {

struct RankFigures {
  std::vector<double> peak_bytes;  // [world] peak of all categories in the step
  std::vector<double> sent_bytes;  // [world] ring-formula bytes sent in the step
  std::vector<double> flops;       // [world] FLOPs computed in the step
  // Pipelines ([world], empty otherwise): each rank's stage, its measured
  // bubble (idle share of its step's actions) and the bytes it sent to its
  // neighbouring stages (activations forward, input gradients backward),
  // and its own peak of activation memory (what 2BP's deferred W raises).
  std::vector<double> stage, bubble, pipeline_bytes, activation_peak_bytes;
  // Classifiers: each rank's own training top-k accuracy in the step (its
  // subnetwork's; NaN on a pipeline stage without the loss), [k][world] for
  // each k of top_k; empty for token models.
  std::vector<int> top_k;
  std::vector<std::vector<double>> train_accuracy;
  // {"peak_bytes": {"min", "mean", "max", "by_rank"}, "sent_bytes": {...}, "flops": {...}};
  // pipelines add "stage", "bubble", "pipeline_bytes" and
  // "activation_peak_bytes" alike; classifiers "train_top1", ... (each
  // rank's own training accuracy).
  // an emulated rank knows only its own figures (others are null).
  nlohmann::json to_json() const;
};

// Collective: one all_gather of a few numbers per rank (after the step's
// counters were read, so it is not part of the step's traffic).
RankFigures gather_rank_figures(comm::Communicator& world, const StepResult& step);
void print_rank_figures(const RankFigures& figures);
// The strategy, plan table and storage groups, for the start-up print.
std::string plan_text(const Trainer& trainer);
// The pipeline's stages (blocks, ranks) and schedule, for the start-up print.
std::string pipeline_text(const Trainer& trainer);

}  // namespace sdp::app
