#pragma once
// FLOPs of the ops actually called (docs/ARCHITECTURE.md "Measurements"): matmuls count
// 2 m n k, attention counts the products over the causal pairs it computes
// (its backward includes the recomputed scores). Counted on every device,
// meta included, so a dry run reports what a real step would compute.
// Process-wide; ops are called from one thread at a time.
namespace sdp::ops {

double flops_counted();        // since the last reset
void reset_flop_count();
void count_flops(double flops);

}  // namespace sdp::ops
