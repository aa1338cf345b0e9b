// Causal grouped-query attention: shape checks, then device and dtype dispatch.
#include <omp.h>

#include "kernels/cpu/attention.h"
#include "kernels/dispatch.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"

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

void check_workspace(const Tensor& q, const Tensor& workspace, const cpu::AttentionDims& d,
                     const char* op) {
  expect_same_device(q, workspace, op);
  expect_dtype(workspace, q.dtype(), op, "workspace");
  expect_contiguous(workspace, op, "workspace");
  const int64_t need = attention_workspace_elems(d.batch, d.seq, d.q_heads, d.kv_heads, d.head_dim);
  if (workspace.numel() < need)
    fail(op, ": workspace has ", workspace.numel(), " elements, needs at least ", need,
         " (attention_workspace_elems for ", omp_get_max_threads(), " threads)");
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

int64_t attention_workspace_elems(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t Dh,
                                  Device) {
  return cpu::attention_workspace_elems({B, T, Hq, Hkv, Dh}, omp_get_max_threads());
}

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                       Tensor& lse, Tensor& workspace) {
  constexpr const char* op = "attention_forward";
  const cpu::AttentionDims d = check_qkv(q, k, v, op);
  check_like(q, out, q.shape(), op, "out");
  check_like(q, lse, {d.batch, d.q_heads, d.seq}, op, "lse");
  check_workspace(q, workspace, d, op);
  count_flops(causal_flops(d, 2));  // Q K^T, P V
  if (!detail::runs_on_cpu(q, op)) return;
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
  check_like(q, lse, {d.batch, d.q_heads, d.seq}, op, "lse");
  check_like(q, dq, q.shape(), op, "dq");
  check_like(q, dk, k.shape(), op, "dk");
  check_like(q, dv, k.shape(), op, "dv");
  check_workspace(q, workspace, d, op);
  count_flops(causal_flops(d, 5));  // recomputed Q K^T, then dV, dP, dQ, dK
  if (!detail::runs_on_cpu(q, op)) return;
  detail::on_float_dtype(q.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::attention_backward<T>(dout.data<T>(), q.data<T>(), k.data<T>(), v.data<T>(),
                               out.data<T>(), lse.data<T>(), dq.data<T>(), dk.data<T>(),
                               dv.data<T>(), workspace.data<T>(), d);
  });
}

}  // namespace sdp::ops
