#pragma once
// Simulation costs of a named model cut into P stages, from the model itself
// instead of a measured costs file: per stage the FLOPs of F, I and W
// (site_costs.h, counted on the meta device), the bytes crossing each
// boundary, and the bytes one micro-batch holds, measured exactly by running
// that stage alone on a meta allocator. FLOPs become seconds at one rate per
// action kind (ComputeRates): one rate for all, or rates calibrated on a
// measured run so that its own totals come back.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/pipeline/schedule_simulator.h"
#include "engine/pipeline/site_costs.h"
#include "models/common/stage_span.h"

namespace sdp::pipeline_tool {

// What is simulated: a named model, one micro-batch of `batch` x `seq`
// (ResNet: seq = the image side), cut into `stages` (balanced by counted
// FLOPs, or as `stage_blocks` "3,3,..." lists them), parameters in `dtype`.
struct ModelCase {
  std::string model;
  int64_t batch = 0, seq = 0;
  int stages = 0;
  std::string stage_blocks;  // empty: balanced
  DType dtype = DType::f32;
  std::string describe() const;
};

// One stage's counted figures.
struct ModelStage {
  pipeline::StageCost flops;          // span, F / I / W FLOPs, parameters, received bytes
  int64_t activation_bytes = 0;       // held after its forward_stage, until I (or B)
  int64_t weight_grad_bytes = 0;      // still held after a split backward_stage, until W
};

struct ModelStages {
  ModelCase model_case;
  int blocks = 0;
  std::vector<ModelStage> stages;       // [P]
  std::vector<int64_t> boundary_bytes;  // [P - 1] one activation (and its gradient)
};

// Fails for an unknown model (naming the valid ones), a stage count or
// stage_blocks the model cannot take, or batch / seq below 1.
ModelStages count_model_stages(const ModelCase& model_case);

// FLOPs per second of each action kind; a whole backward B runs at the rate
// I and W together reach (its FLOPs over I's seconds plus W's).
struct ComputeRates {
  double forward = 0, input_grad = 0, weight_grad = 0;
  std::string source;  // how they were found, for the report
};

// One rate for every kind (> 0).
ComputeRates uniform_rates(double flops_per_second);
// Rates per kind = the measured run's counted FLOPs of that kind, summed over
// its stages, over its measured seconds of that kind summed over its stages
// (the costs file's mean action times). With these rates the measured run's
// summed F, I and W times are reproduced exactly; each stage's error is
// returned in `per_stage_error` ([P_measured] largest relative error of its
// F, I, W times). Fails when the file's stage count is not the measured
// case's, or a stage has a zero time for a kind that has FLOPs.
// Each stage's rate of each kind (its FLOPs over its measured time) must lie
// within [kMinFlopsPerSecond, kMaxFlopsPerSecond] of engine/plan/step_time.h:
// a time of 1e308 s or 1e-310 s is refused, naming `source` (the file), the
// stage and the kind, never turned into a rate printed as 0 or inf.
ComputeRates calibrated_rates(const ModelStages& measured, const pipeline::SimulationCosts& costs,
                              std::vector<double>* per_stage_error,
                              const std::string& source = "the costs file");

// The costs file of a measured run that --calibrate names: its stage count
// is the number of "stages" it lists (at least one). Every error names the
// file, the stage and the key.
pipeline::SimulationCosts read_measured_costs(const std::string& path);

// The costs the simulator takes: times = FLOPs / rate, B = I + W, bytes as
// counted, the link free (a latency or bandwidth can be given in a costs
// file instead).
pipeline::SimulationCosts model_costs(const ModelStages& stages, const ComputeRates& rates);

}  // namespace sdp::pipeline_tool
