// Causal grouped-query attention on CUDA against the CPU, forward (out and
// the saved lse, accum_dtype) and backward (dq, dk, dv), for every head dim
// our models use around the kernels' tile sizes: T = 1 (one key), 7 (less
// than a tile), 64 (a whole tile) and 200 (whole tiles plus a partial one).
// The GPU's workspace and outputs start as NaN, so a kernel that reads
// scratch it did not write, or leaves an element unwritten, fails.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("attention forward and backward_input on CUDA match the CPU", "[ops][attention]") {
  const int64_t B = 2, Hq = 4, Hkv = 2;  // two query heads per kv head
  for (DType dt : kGpuDtypes)
    for (int64_t Dh : {16, 24, 64, 128})
      for (int64_t T : {1, 7, 64, 200}) {
        CAPTURE(name_of(dt), Dh, T);
        const std::string label = " B=2 T=" + std::to_string(T) + " Hq=4 Hkv=2 Dh=" +
                                  std::to_string(Dh);
        TwinArena a;
        const DType acc = accum_dtype(dt);
        const Shape q_shape{B, T, Hq, Dh}, kv_shape{B, T, Hkv, Dh}, lse_shape{B, Hq, T};
        // scores q.k / sqrt(Dh) with a standard deviation near 1.3: softmax
        // rows neither flat nor one-hot
        Twin q = a.uniform(q_shape, dt, 1, -2, 2), k = a.uniform(kv_shape, dt, 2, -2, 2);
        Twin v = a.uniform(kv_shape, dt, 3, -1, 1);
        Tensor host_ws = a.host({ops::attention_workspace_elems(B, T, Hq, Hkv, Dh, Device::cpu)});
        Tensor dev_ws =
            a.device({ops::attention_workspace_elems(B, T, Hq, Hkv, Dh, Device::cuda)}, dt);
        a.poison(dev_ws);

        Twin out = a.output(q_shape, dt), lse = a.output(lse_shape, acc);
        ops::attention_forward(q.dev, k.dev, v.dev, out.dev, lse.dev, dev_ws);
        ops::attention_forward(q.host, k.host, v.host, out.host, lse.host, host_ws);
        a.expect_close("attention_forward out" + label, out.dev, out.host, kAttention);
        a.expect_close("attention_forward lse" + label, lse.dev, lse.host, kAttention);

        // backward from the reference's out and lse, rounded to their dtypes
        // on both sides
        Twin saved_out = a.values(q_shape, dt, host_values(out.host));
        Twin saved_lse = a.values(lse_shape, acc, host_values(lse.host));
        Twin dout = a.uniform(q_shape, dt, 4, -1, 1);
        Twin dq = a.output(q_shape, dt), dk = a.output(kv_shape, dt), dv = a.output(kv_shape, dt);
        a.poison(dev_ws);
        ops::attention_backward_input(dout.dev, q.dev, k.dev, v.dev, saved_out.dev, saved_lse.dev,
                                      dq.dev, dk.dev, dv.dev, dev_ws);
        ops::attention_backward_input(dout.host, q.host, k.host, v.host, saved_out.host,
                                      saved_lse.host, dq.host, dk.host, dv.host, host_ws);
        // With one key (T = 1) every softmax row is constant: dq and dk are
        // zero up to roundoff, so they are measured against dv's scale.
        const double floor = T == 1 ? max_abs(host_values(dv.host)) : kTiny;
        a.expect_close("attention_backward_input dq" + label, dq.dev, dq.host, kAttention, floor);
        a.expect_close("attention_backward_input dk" + label, dk.dev, dk.host, kAttention, floor);
        a.expect_close("attention_backward_input dv" + label, dv.dev, dv.host, kAttention);
      }
}
