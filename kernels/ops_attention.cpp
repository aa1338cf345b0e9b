// Causal grouped-query attention: shape and dtype checks (shared by every
// device), then device and dtype dispatch.
#include <omp.h>

#include "kernels/cpu/attention.h"
#include "kernels/dispatch.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"
#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/attention.h"
#endif

namespace sdp::ops {
namespace {

// q [B, T, Hq, Dh]; k, v [B, T, Hkv, Dh].
cpu::AttentionDims check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  if (q.ndim() != 4) fail(op, ": q must be [B, T, Hq, Dh], got ", q.shape().str());
  if (k.ndim() != 4) fail(op, ": k must be [B, T, Hkv, Dh], got ", k.shape().str());
  const cpu::AttentionDims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  if (d.kv_heads <= 0 || d.q_heads % d.kv_heads != 0)
    fail(op, ": query heads Hq = ", d.q_heads, " must be a multiple of kv heads Hkv = ",
         d.kv_heads);
  if (d.head_dim <= 0) fail(op, ": head dim must be > 0, got ", d.head_dim);
#ifdef SDP_HAVE_CUDA
  // The CUDA kernels size their tiles and register arrays for this bound.
  if (q.device() == Device::cuda && d.head_dim > cuda::kAttentionMaxHeadDim)
    fail(op, ": head dim ", d.head_dim, " is not supported on CUDA (valid: 1..",
         cuda::kAttentionMaxHeadDim, ")");
#endif
  detail::expect_float(q, op, "q");
  expect_shape(k, {d.batch, d.seq, d.kv_heads, d.head_dim}, op, "k");
  expect_shape(v, k.shape(), op, "v");
  for (const Tensor* t : {&q, &k, &v}) expect_contiguous(*t, op, t == &q ? "q" : t == &k ? "k" : "v");
  expect_same_device(q, k, op);
  expect_same_device(q, v, op);
  expect_dtype(k, q.dtype(), op, "k");
  expect_dtype(v, q.dtype(), op, "v");
  return d;
}

void check_like(const Tensor& q, const Tensor& t, const Shape& shape, const char* op,
                const char* arg) {
  expect_shape(t, shape, op, arg);
  expect_same_device(q, t, op);
  expect_dtype(t, q.dtype(), op, arg);
  expect_contiguous(t, op, arg);
}

// lse [B, Hq, T] in accum_dtype(q): f32 next to bf16.
void check_lse(const Tensor& q, const Tensor& lse, const cpu::AttentionDims& d, const char* op) {
  expect_shape(lse, {d.batch, d.q_heads, d.seq}, op, "lse");
  expect_same_device(q, lse, op);
  detail::expect_accum(lse, q.dtype(), op, "lse");
  expect_contiguous(lse, op, "lse");
}

// A meta tensor cannot tell which device its dry run mirrors (the caller sized
// the workspace with Allocator::target_device()), so its size is checked on
// real devices only.
void check_workspace(const Tensor& q, const Tensor& workspace, const cpu::AttentionDims& d,
                     const char* op) {
  expect_same_device(q, workspace, op);
  expect_dtype(workspace, q.dtype(), op, "workspace");
  expect_contiguous(workspace, op, "workspace");
  if (q.device() == Device::meta) return;
  const int64_t need =
      attention_workspace_elems(d.batch, d.seq, d.q_heads, d.kv_heads, d.head_dim, q.device());
  if (workspace.numel() < need)
    fail(op, ": workspace has ", workspace.numel(), " elements, needs at least ", need,
         " (attention_workspace_elems for ", device_name(q.device()), ", ",
         omp_get_max_threads(), " threads)");
}

}  // namespace

namespace {
// Products of one (query, key) pair over the head dimension, summed over the
// causal pairs of every head: `matmuls` = how many [T, T] x Dh products.
double causal_flops(const cpu::AttentionDims& d, int matmuls) {
  const double pairs = static_cast<double>(d.seq) * static_cast<double>(d.seq + 1) / 2;
  return 2.0 * matmuls * static_cast<double>(d.batch * d.q_heads * d.head_dim) * pairs;
}
}  // namespace

// CPU: per-thread score tiles (cpu/attention.h). CUDA: none, the kernels
// keep their tiles in shared memory and registers (cuda/attention.h). Meta
// computes nothing.
int64_t attention_workspace_elems(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t Dh,
                                  Device device) {
  switch (device) {
    case Device::cpu:
      return cpu::attention_workspace_elems({B, T, Hq, Hkv, Dh}, omp_get_max_threads());
    case Device::cuda:
    case Device::meta:
      return 0;
  }
  return 0;
}

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                       Tensor& lse, Tensor& workspace) {
  constexpr const char* op = "attention_forward";
  const cpu::AttentionDims d = check_qkv(q, k, v, op);
  check_like(q, out, q.shape(), op, "out");
  check_lse(q, lse, d, op);
  check_workspace(q, workspace, d, op);
  count_flops(causal_flops(d, 2));  // Q K^T, P V
  switch (detail::backend_of(q, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::attention_forward(q, k, v, out, lse)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(q.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::attention_forward<T>(q.data<T>(), k.data<T>(), v.data<T>(), out.data<T>(),
                              lse.data<T>(), workspace.data<T>(), d);
  });
}

void attention_backward_input(const Tensor& dout, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& lse,
                              Tensor& dq, Tensor& dk, Tensor& dv, Tensor& workspace) {
  constexpr const char* op = "attention_backward_input";
  const cpu::AttentionDims d = check_qkv(q, k, v, op);
  check_like(q, dout, q.shape(), op, "dout");
  check_like(q, out, q.shape(), op, "out");
  check_lse(q, lse, d, op);
  check_like(q, dq, q.shape(), op, "dq");
  check_like(q, dk, k.shape(), op, "dk");
  check_like(q, dv, k.shape(), op, "dv");
  check_workspace(q, workspace, d, op);
  // The algorithm's products: recomputed Q K^T, then dV, dP, dQ, dK (the CUDA
  // kernels recompute Q K^T and dO V^T once more; that is not counted).
  count_flops(causal_flops(d, 5));
  switch (detail::backend_of(q, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::attention_backward_input(dout, q, k, v, out, lse, dq, dk, dv));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(q.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::attention_backward<T>(dout.data<T>(), q.data<T>(), k.data<T>(), v.data<T>(),
                               out.data<T>(), lse.data<T>(), dq.data<T>(), dk.data<T>(),
                               dv.data<T>(), workspace.data<T>(), d);
  });
}

}  // namespace sdp::ops
