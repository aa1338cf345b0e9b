#pragma once
// What each site of a model (model.h: 0 input stage, 1 + b block b, L + 1
// output stage) costs for one micro-batch, counted by running one training
// forward and backward, normally on the meta device, where nothing is
// computed but every op still counts its FLOPs (kernels/flop_count.h).
// split_stages (stage_split.h) balances pipeline stages over these.
//
// Attribution. The FLOP counter is read at every parameter-hook call and
// every gradient-ready report, which cuts a pass into segments, and each
// segment goes to one site:
//  * inside a site's hook window (needed .. done): that site; forward
//    FLOPs in the forward pass, input-gradient FLOPs in backward (a
//    recomputed block's forward, were one checkpointed, too);
//  * before a pass's first window, or after a gradient-ready report and up
//    to the next window: the site whose window comes next (the loss
//    gradient goes to the output stage);
//  * after a window, up to the next event: the site just closed (in
//    backward its weight gradients, which the contract puts after done;
//    in forward the loss after the output stage);
//  * up to a gradient-ready report: the site whose parameters it reports
//    (the site just closed when it lists one of them, else the lowest site
//    that does: the embedding's gradient, a scatter after the last block,
//    goes to the input stage although that site has no backward window).
// Work after a window or up to a report counts as weight-gradient FLOPs,
// work before or inside a backward window as input-gradient FLOPs. The
// split follows the windows: a weight gradient a model computes inside its
// window (LLaMA's LM head does) counts as input-gradient work; the site's
// backward total is right either way. The segments tile the passes, so the
// sites' FLOPs sum to the passes' totals.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/tensor.h"
#include "models/common/model.h"
#include "models/common/stage_span.h"
#include "models/registry.h"

namespace sdp::pipeline {

struct SiteCost {
  double forward_flops = 0;
  double backward_input_flops = 0;   // input gradients (I of a 2BP schedule)
  double backward_weight_flops = 0;  // weight gradients (W)
  int64_t param_numel = 0;           // declared parameters; a tied one at its first site only
  int64_t param_bytes = 0;           // param_numel in the model's parameter dtype
  double backward_flops() const { return backward_input_flops + backward_weight_flops; }
  double flops() const { return forward_flops + backward_flops(); }
};

struct SiteCosts {
  std::string model;                    // the model's registry name
  std::vector<SiteCost> sites;          // [L + 2]
  double forward_total_flops = 0;       // counted over the whole forward
  double backward_total_flops = 0;      // and the whole backward
  // [L]: bytes of the residual stream entering block b for this micro-batch
  // (what a stage starting at block b > 0 receives); empty for a family
  // whose block inputs this layer does not know.
  std::vector<int64_t> block_input_bytes;

  int blocks() const { return static_cast<int>(sites.size()) - 2; }
  // Per site, what split_stages balances: forward + backward FLOPs, or
  // parameter bytes.
  std::vector<double> compute_flops() const;
  std::vector<double> param_bytes() const;
};

// One training forward and backward (loss scale 1, weight gradients not
// split) of inputs / targets (as Model::forward) on `model`, which must be
// materialized with gradients allocated. Parameter hooks are set for the
// run and reset to none afterwards (also on failure); the process's FLOP
// counter reads afterwards what it read before. Sites the model skips on
// this rank (B-SDP) count no FLOPs; parameter sizes are the declared ones,
// held or not.
SiteCosts count_site_costs(Model& model, const Tensor& inputs, const Tensor& targets);

// The same for a named model on a meta device (which mirrors the CUDA
// allocator, as the trainer's meta runs): LLaMA tokens [batch, seq];
// images [batch, in_channels, seq, seq] (seq = the image side, 32 for
// CIFAR; a Swin reads its own img_size whatever seq says). Parameters in
// `dtype` (bf16 as a CUDA run keeps them).
SiteCosts count_site_costs(const std::string& model_name, const ModelDataFacts& facts,
                           int64_t batch, int64_t seq, DType dtype = DType::f32);

// What each stage of a cut costs: the sums of its sites' figures, and the
// bytes it receives from the previous stage for one micro-batch (0 on the
// first stage; block_input_bytes of its first block, -1 where unknown).
struct StageCost {
  StageSpan span;
  double forward_flops = 0, backward_input_flops = 0, backward_weight_flops = 0;
  int64_t param_numel = 0, param_bytes = 0;
  int64_t received_bytes = 0;
};
std::vector<StageCost> stage_costs(const std::vector<StageSpan>& spans, const SiteCosts& costs);

}  // namespace sdp::pipeline
