#include "engine/pipeline/deferred_weight_grads.h"

#include "engine/core/error.h"

namespace sdp::pipeline {

const char* to_string(DeferredWeightGrads mode) {
  return mode == DeferredWeightGrads::batched ? "batched" : "per-micro-batch";
}

DeferredWeightGrads parse_deferred_weight_grads(const std::string& text) {
  if (text == "per-micro-batch") return DeferredWeightGrads::per_micro_batch;
  if (text == "batched") return DeferredWeightGrads::batched;
  fail("deferred weight gradients '", text, "' is invalid (valid: per-micro-batch, batched)");
}

std::vector<std::pair<size_t, size_t>> weight_grad_runs(const std::vector<Action>& actions) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < actions.size();) {
    if (actions[i].kind != ActionKind::weight_grad) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < actions.size() && actions[end].kind == ActionKind::weight_grad) ++end;
    runs.emplace_back(i, end);
    i = end;
  }
  return runs;
}

bool has_weight_grads(const Schedule& schedule) {
  for (const auto& stage : schedule.stages)
    for (const Action& a : stage)
      if (a.kind == ActionKind::weight_grad) return true;
  return false;
}

}  // namespace sdp::pipeline
