#include "apps/sdp-pipeline/model_costs.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "engine/checkpoint/json_file.h"
#include "engine/core/allocator.h"
#include "engine/core/config_limits.h"
#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/pipeline/costs_json.h"
#include "engine/pipeline/stage_split.h"
#include "engine/plan/step_time.h"
#include "models/registry.h"

namespace sdp::pipeline_tool {

namespace {

// One micro-batch's model inputs and targets on `meta`, as count_site_costs
// builds them: LLaMA tokens; images (of side seq, or the model's own) and labels.
struct MetaBatch {
  OwnedTensor inputs, targets;
};

MetaBatch meta_batch(Allocator& meta, const Model& model, const ModelCase& c) {
  MetaBatch b;
  if (model.image_channels() == 0) {
    b.inputs = OwnedTensor(meta, {c.batch, c.seq}, DType::i32, MemCategory::workspace);   // [B, T]
    b.targets = OwnedTensor(meta, {c.batch, c.seq}, DType::i32, MemCategory::workspace);  // [B, T]
  } else {
    b.inputs = OwnedTensor(meta, model.input_shape(c.batch, c.seq), c.dtype,
                           MemCategory::workspace);                                      // [B, C, H, W]
    b.targets = OwnedTensor(meta, {c.batch}, DType::i32, MemCategory::workspace);      // [B]
  }
  return b;
}

// Runs one micro-batch through the stage `span` alone, as a pipeline rank
// holds it (split_shared layout, only the span's groups materialized), and
// reads the activation bytes it holds after the forward, and after a backward
// whose weight gradients are deferred.
void measure_stage_bytes(const ModelCase& c, const StageSpan& span, ModelStage& out) {
  // Declared before the model, which keeps a reference to it; it mirrors the
  // CUDA allocator as the trainer's and count_site_costs' meta runs do.
  MetaAllocator meta(512, Device::cuda);
  ModelLayout layout;
  layout.split_shared = true;
  std::unique_ptr<Model> model = make_model(c.model, layout, {});
  const int L = model->block_count();
  std::vector<bool> held(static_cast<size_t>(model->params().group_count()), false);
  for (const Component& comp : model->components())
    held[static_cast<size_t>(comp.group)] = span.contains_site(comp.site, L);
  model->materialize(meta, c.dtype, held);
  model->params().allocate_grads();
  model->set_stage(span);
  MetaBatch batch = meta_batch(meta, *model, c);

  const int64_t before = static_cast<int64_t>(meta.stats().current(MemCategory::activation));
  OwnedTensor received;
  if (!span.has_input_stage()) {
    // What the stage executor receives: an activation-category tensor the
    // stage keeps until its backward (stage_executor.cpp).
    received = OwnedTensor(meta, model->stage_input_shape(*batch.inputs, span.first_block),
                           model->dtype(), MemCategory::activation);
  }
  model->forward_stage(*batch.inputs, *batch.targets, std::move(received), 0);
  out.activation_bytes = static_cast<int64_t>(meta.stats().current(MemCategory::activation)) - before;

  OwnedTensor output_grad;
  if (!span.has_output_stage(L)) {
    const Tensor& y = model->stage_output(0);
    output_grad = OwnedTensor(meta, y.shape(), y.dtype(), MemCategory::activation);
  }
  {
    // The input gradient goes to the previous stage and is freed there.
    OwnedTensor sent = model->backward_stage(std::move(output_grad), 1.0, /*split_weight_grads=*/true, {}, 0);
  }
  out.weight_grad_bytes = static_cast<int64_t>(meta.stats().current(MemCategory::activation)) - before;
  model->backward_weight({}, 0);
}

// A stage's measured time of one kind, where it has FLOPs of that kind: > 0,
// and within the times that make a plausible rate.
double checked_time(double flops, double seconds, const char* kind, int stage,
                    const std::string& source) {
  if (!(flops > 0)) return seconds;
  namespace C = calibration_limits;
  if (!(seconds > 0))
    fail("--calibrate ", source, ": stage ", stage, " has ", flops, " counted ", kind,
         " FLOPs but a measured ", kind, " time of ", seconds,
         " s (valid: a time > 0 for every kind a stage computes)");
  const double rate = flops / seconds;
  if (!(rate >= C::kMinFlopsPerSecond && rate <= C::kMaxFlopsPerSecond))
    fail("--calibrate ", source, ": stage ", stage, "'s measured ", kind, " time of ", seconds,
         " s for ", flops, " counted FLOPs is ",
         std::isfinite(rate) ? format("a rate of ", rate, " FLOP/s") : std::string("no finite rate"),
         " (valid: ",
         C::kMinFlopsPerSecond, " to ", C::kMaxFlopsPerSecond, " FLOP/s, a time from ",
         flops / C::kMaxFlopsPerSecond, " to ", flops / C::kMinFlopsPerSecond, " s)");
  return seconds;
}

}  // namespace

std::string ModelCase::describe() const {
  return format(model, ", micro-batch ", batch, " x ", seq, ", ", stages, " stages",
                stage_blocks.empty() ? std::string(" balanced by FLOPs") : " of blocks " + stage_blocks,
                ", ", dtype_name(dtype));
}

ModelStages count_model_stages(const ModelCase& c) {
  if (c.batch < 1 || c.seq < 1)
    fail("--batch ", c.batch, ", --seq ", c.seq, " for model ", c.model, " (valid: both >= 1)");
  model_family(c.model);  // refuses an unknown name, listing the valid ones
  ModelStages out;
  out.model_case = c;
  const pipeline::SiteCosts sites = pipeline::count_site_costs(c.model, {}, c.batch, c.seq, c.dtype);
  out.blocks = sites.blocks();
  const std::vector<StageSpan> spans = pipeline::split_stages(
      out.blocks, c.stages,
      c.stage_blocks.empty() ? std::vector<int>{} : pipeline::parse_stage_blocks(c.stage_blocks),
      c.stage_blocks.empty() ? sites.compute_flops() : std::vector<double>{}, c.model);
  for (const pipeline::StageCost& f : pipeline::stage_costs(spans, sites)) {
    ModelStage s;
    s.flops = f;
    measure_stage_bytes(c, f.span, s);
    if (!f.span.has_input_stage()) {
      SDP_CHECK(f.received_bytes >= 0, "model ", c.model, " does not report its block input sizes");
      out.boundary_bytes.push_back(f.received_bytes);
    }
    out.stages.push_back(s);
  }
  return out;
}

ComputeRates uniform_rates(double flops_per_second) {
  if (!(flops_per_second > 0) || !std::isfinite(flops_per_second))
    fail("--flops-per-second ", flops_per_second, " is invalid (valid: a finite number > 0)");
  ComputeRates r;
  r.forward = r.input_grad = r.weight_grad = flops_per_second;
  r.source = format("one rate, ", flops_per_second, " FLOP/s (--flops-per-second)");
  return r;
}

ComputeRates calibrated_rates(const ModelStages& measured, const pipeline::SimulationCosts& costs,
                              std::vector<double>* per_stage_error, const std::string& source) {
  const size_t P = measured.stages.size();
  if (costs.stages.size() != P)
    fail("--calibrate ", source, ": the costs file has ", costs.stages.size(), " stages, the measured case (",
         measured.model_case.describe(), ") has ", P);
  double flops[3] = {0, 0, 0}, seconds[3] = {0, 0, 0};
  for (size_t s = 0; s < P; ++s) {
    const pipeline::StageCost& f = measured.stages[s].flops;
    const pipeline::StageCosts& t = costs.stages[s];
    const int st = static_cast<int>(s);
    flops[0] += f.forward_flops;
    seconds[0] += checked_time(f.forward_flops, t.forward, "forward", st, source);
    flops[1] += f.backward_input_flops;
    seconds[1] += checked_time(f.backward_input_flops, t.input_grad, "input-gradient", st, source);
    flops[2] += f.backward_weight_flops;
    seconds[2] += checked_time(f.backward_weight_flops, t.weight_grad, "weight-gradient", st, source);
  }
  for (int k = 0; k < 3; ++k)
    if (!(flops[k] > 0))
      fail("--calibrate ", source, ": the measured case (", measured.model_case.describe(),
           ") counts no FLOPs of action kind ", k == 0 ? "F" : k == 1 ? "I" : "W");
  ComputeRates r;
  r.forward = flops[0] / seconds[0];
  r.input_grad = flops[1] / seconds[1];
  r.weight_grad = flops[2] / seconds[2];
  r.source = format("rates per kind calibrated on a measured run (", measured.model_case.describe(),
                    "): F ", r.forward, ", I ", r.input_grad, ", W ", r.weight_grad,
                    " FLOP/s; they reproduce its summed F, I and W times exactly");
  if (per_stage_error) {
    per_stage_error->clear();
    for (size_t s = 0; s < P; ++s) {
      const pipeline::StageCost& f = measured.stages[s].flops;
      const pipeline::StageCosts& t = costs.stages[s];
      const double pairs[3][2] = {{f.forward_flops / r.forward, t.forward},
                                  {f.backward_input_flops / r.input_grad, t.input_grad},
                                  {f.backward_weight_flops / r.weight_grad, t.weight_grad}};
      double worst = 0;
      for (const auto& p : pairs)
        if (p[1] > 0) worst = std::max(worst, std::fabs(p[0] - p[1]) / p[1]);
      per_stage_error->push_back(worst);
    }
  }
  return r;
}

pipeline::SimulationCosts read_measured_costs(const std::string& path) {
  const nlohmann::json j = checkpoint::read_json_file(path);
  const size_t stages = j.is_object() && j.contains("stages") && j["stages"].is_array() ? j["stages"].size() : 0;
  if (stages < 1 || stages > static_cast<size_t>(config_limits::kPipelineStages))
    fail("--calibrate ", path, " lists ", stages, " \"stages\" (valid: 1 to ", config_limits::kPipelineStages,
         ", the costs.json of a measured run)");
  try {
    return pipeline::costs_from_json(j, static_cast<int>(stages));
  } catch (const Error& e) {
    fail("--calibrate ", path, ": ", e.what());
  }
}

pipeline::SimulationCosts model_costs(const ModelStages& stages, const ComputeRates& rates) {
  SDP_CHECK(rates.forward > 0 && rates.input_grad > 0 && rates.weight_grad > 0,
            "model_costs needs positive rates");
  pipeline::SimulationCosts out;
  for (const ModelStage& s : stages.stages) {
    pipeline::StageCosts c;
    c.forward = s.flops.forward_flops / rates.forward;
    c.input_grad = s.flops.backward_input_flops / rates.input_grad;
    c.weight_grad = s.flops.backward_weight_flops / rates.weight_grad;
    c.backward = c.input_grad + c.weight_grad;
    c.activation_bytes = s.activation_bytes;
    c.weight_grad_bytes = s.weight_grad_bytes;
    out.stages.push_back(c);
  }
  out.boundary_bytes = stages.boundary_bytes;
  return out;
}

}  // namespace sdp::pipeline_tool
