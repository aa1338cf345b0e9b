#include "kernels/flop_count.h"

namespace sdp::ops {

namespace {
double g_flops = 0;
}

double flops_counted() { return g_flops; }
void reset_flop_count() { g_flops = 0; }
void count_flops(double flops) { g_flops += flops; }

}  // namespace sdp::ops
