#include "engine/pipeline/site_costs.h"

#include <algorithm>
#include <memory>

#include "engine/core/allocator.h"
#include "engine/core/error.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"

namespace sdp::pipeline {

namespace {

// Cuts the FLOP counter into segments at every hook call and gradient
// report and hands each segment to a site (site_costs.h, "Attribution").
class Attribution {
 public:
  Attribution(const Model& model, std::vector<SiteCost>& sites) : model_(model), sites_(sites) {
    site_params_.reserve(sites.size());
    for (int s = 0; s < static_cast<int>(sites.size()); ++s)
      site_params_.push_back(model.site_params(s));
  }

  void begin(ParamPass pass) {
    pass_ = pass;
    mark_ = ops::flops_counted();
    open_ = closed_ = previous_ = -1;
    after_report_ = false;
  }

  void needed(int site, ParamPass pass) {
    check_pass(site, pass, "needed");
    SDP_CHECK(open_ < 0, "model ", model_.name(), ": needed(", site, ") while site ", open_,
              "'s window is open (hooks must not nest)");
    // Before the first window or after a report: the work leads into this
    // site. After a bare done: the closed site's trailing work.
    if (closed_ < 0 || after_report_)
      take(site, /*weight=*/false);
    else
      take(closed_, /*weight=*/true);
    open_ = site;
  }

  void done(int site, ParamPass pass) {
    check_pass(site, pass, "done");
    SDP_CHECK(open_ == site, "model ", model_.name(), ": done(", site, ") without its needed (open: ",
              open_, ")");
    take(site, /*weight=*/false);
    open_ = -1;
    closed_ = site;
    after_report_ = false;
  }

  void reported(std::span<const int> ids) {
    SDP_CHECK(pass_ == ParamPass::backward, "model ", model_.name(),
              ": gradients reported ready outside backward");
    if (open_ >= 0) {
      take(open_, /*weight=*/false);
    } else {
      take(reported_site(ids), /*weight=*/true);
    }
    after_report_ = true;
  }

  // The rest of the pass: the site that had the work before it.
  void end() {
    SDP_CHECK(open_ < 0, "model ", model_.name(), ": site ", open_, "'s window never closed");
    SDP_CHECK(previous_ >= 0, "model ", model_.name(), ": a pass without any site");
    take(previous_, /*weight=*/true);
  }

 private:
  void check_pass(int site, ParamPass pass, const char* call) const {
    SDP_CHECK(site >= 0 && site < static_cast<int>(sites_.size()), "model ", model_.name(), ": ",
              call, "(", site, ") names no site (valid: 0 .. ", sites_.size() - 1, ")");
    SDP_CHECK(pass == pass_, "model ", model_.name(), ": ", call, "(", site, ") of the ",
              pass == ParamPass::forward ? "forward" : "backward", " pass during the other pass");
  }

  int reported_site(std::span<const int> ids) const {
    auto lists = [&](int s) {
      const std::vector<int>& p = site_params_[static_cast<size_t>(s)];
      return std::any_of(ids.begin(), ids.end(),
                         [&](int id) { return std::find(p.begin(), p.end(), id) != p.end(); });
    };
    if (closed_ >= 0 && lists(closed_)) return closed_;
    for (int s = 0; s < static_cast<int>(sites_.size()); ++s)
      if (lists(s)) return s;
    return closed_ >= 0 ? closed_ : 0;
  }

  // The FLOPs since the last event go to `site`; in backward, as weight or
  // input gradients.
  void take(int site, bool weight) {
    const double now = ops::flops_counted();
    const double flops = now - mark_;
    mark_ = now;
    SiteCost& c = sites_[static_cast<size_t>(site)];
    if (pass_ == ParamPass::forward)
      c.forward_flops += flops;
    else if (weight)
      c.backward_weight_flops += flops;
    else
      c.backward_input_flops += flops;
    previous_ = site;
  }

  const Model& model_;
  std::vector<SiteCost>& sites_;
  std::vector<std::vector<int>> site_params_;
  ParamPass pass_ = ParamPass::forward;
  double mark_ = 0;
  int open_ = -1, closed_ = -1, previous_ = -1;
  bool after_report_ = false;
};

// Leaves the model without hooks and the process's FLOP counter as found,
// however the run ends.
class RunGuard {
 public:
  explicit RunGuard(Model& model) : model_(model), saved_flops_(ops::flops_counted()) {}
  ~RunGuard() {
    model_.set_param_hooks(ParamHooks{});
    ops::reset_flop_count();
    ops::count_flops(saved_flops_);
  }
  RunGuard(const RunGuard&) = delete;
  RunGuard& operator=(const RunGuard&) = delete;

 private:
  Model& model_;
  double saved_flops_;
};

// Bytes of the residual stream entering each block (block_input_shape).
std::vector<int64_t> block_input_bytes(const Model& model, const Tensor& inputs) {
  const int64_t elem = static_cast<int64_t>(dtype_size(model.dtype()));
  std::vector<int64_t> bytes;
  for (int b = 0; b < model.block_count(); ++b)
    bytes.push_back(model.block_input_shape(inputs, b).numel() * elem);
  return bytes;
}

}  // namespace

std::vector<double> SiteCosts::compute_flops() const {
  std::vector<double> v;
  for (const SiteCost& s : sites) v.push_back(s.flops());
  return v;
}

std::vector<double> SiteCosts::param_bytes() const {
  std::vector<double> v;
  for (const SiteCost& s : sites) v.push_back(static_cast<double>(s.param_bytes));
  return v;
}

SiteCosts count_site_costs(Model& model, const Tensor& inputs, const Tensor& targets) {
  const ParameterSet& params = model.params();
  if (!params.has_grads())
    fail("counting site costs of model ", model.name(),
         ": materialize it and allocate its gradients first (it runs a training backward)");
  SiteCosts out;
  out.model = model.name();
  out.sites.assign(static_cast<size_t>(model.site_count()), SiteCost{});

  // Declared sizes; a parameter read at two sites (a tied embedding) counts
  // at the first.
  const int64_t elem = static_cast<int64_t>(dtype_size(model.dtype()));
  std::vector<bool> counted(static_cast<size_t>(params.count()), false);
  for (int s = 0; s < model.site_count(); ++s)
    for (int id : model.site_params(s)) {
      if (counted[static_cast<size_t>(id)]) continue;
      counted[static_cast<size_t>(id)] = true;
      const int64_t n = params.decl(id).shape.numel();
      out.sites[static_cast<size_t>(s)].param_numel += n;
      out.sites[static_cast<size_t>(s)].param_bytes += n * elem;
    }

  RunGuard guard(model);
  Attribution attribution(model, out.sites);
  ParamHooks hooks;
  hooks.needed = [&](int site, ParamPass pass) { attribution.needed(site, pass); };
  hooks.done = [&](int site, ParamPass pass) { attribution.done(site, pass); };
  model.set_param_hooks(hooks);
  const GradsReady ready = [&](std::span<const int> ids) { attribution.reported(ids); };

  ops::reset_flop_count();
  attribution.begin(ParamPass::forward);
  model.forward(inputs, targets, /*keep_for_backward=*/true, /*micro_batch=*/0);
  attribution.end();
  out.forward_total_flops = ops::flops_counted();
  attribution.begin(ParamPass::backward);
  model.backward(/*loss_scale=*/1.0, /*split_weight_grads=*/false, ready, /*micro_batch=*/0);
  attribution.end();
  out.backward_total_flops = ops::flops_counted() - out.forward_total_flops;
  out.block_input_bytes = block_input_bytes(model, inputs);
  return out;
}

SiteCosts count_site_costs(const std::string& model_name, const ModelDataFacts& facts,
                           int64_t batch, int64_t seq, DType dtype) {
  if (batch < 1 || seq < 1)
    fail("counting site costs of model ", model_name, ": batch = ", batch, ", seq = ", seq,
         " (valid: both >= 1)");
  // Declared before the model, which keeps a reference to it.
  MetaAllocator meta(512, Device::cuda);
  std::unique_ptr<Model> model = make_model(model_name, ModelLayout{}, facts);
  model->materialize(meta, dtype);
  model->params().allocate_grads();
  OwnedTensor inputs, targets;
  if (model->image_channels() == 0) {
    inputs = OwnedTensor(meta, {batch, seq}, DType::i32, MemCategory::workspace);   // [B, T]
    targets = OwnedTensor(meta, {batch, seq}, DType::i32, MemCategory::workspace);  // [B, T]
  } else {
    inputs = OwnedTensor(meta, model->input_shape(batch, seq), dtype,
                         MemCategory::workspace);                                  // [B, C, H, W]
    targets = OwnedTensor(meta, {batch}, DType::i32, MemCategory::workspace);      // [B]
  }
  return count_site_costs(*model, *inputs, *targets);
}

std::vector<StageCost> stage_costs(const std::vector<StageSpan>& spans, const SiteCosts& costs) {
  const int L = costs.blocks();
  std::vector<StageCost> out;
  for (const StageSpan& span : spans) {
    SDP_CHECK(span.first_block >= 0 && span.first_block < span.end(L) && span.end(L) <= L,
              "stage ", span.describe(L), " is not a span of model ", costs.model, " with ", L,
              " blocks");
    StageCost c;
    c.span = span;
    for (int site = 0; site < L + 2; ++site) {
      if (!span.contains_site(site, L)) continue;
      const SiteCost& s = costs.sites[static_cast<size_t>(site)];
      c.forward_flops += s.forward_flops;
      c.backward_input_flops += s.backward_input_flops;
      c.backward_weight_flops += s.backward_weight_flops;
      c.param_numel += s.param_numel;
      c.param_bytes += s.param_bytes;
    }
    if (span.first_block == 0)
      c.received_bytes = 0;
    else if (costs.block_input_bytes.empty())
      c.received_bytes = -1;
    else
      c.received_bytes = costs.block_input_bytes[static_cast<size_t>(span.first_block)];
    out.push_back(c);
  }
  return out;
}

}  // namespace sdp::pipeline
