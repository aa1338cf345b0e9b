// Window self-attention with relative position bias and mask (ops.h):
// shape, dtype and index checks (shared by every device), FLOP counting,
// then device and dtype dispatch. qkv, table, mask, out, probs, dout, dqkv
// hold one float dtype; dtable, a weight gradient, holds accum_dtype of it
// (f32 next to bf16); index is i32, [N, N] or flat [N N].
#include <cmath>
#include <cstdint>

#include "kernels/cpu/window_attention.h"
#include "kernels/dispatch.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/window_attention.h"
#endif

namespace sdp::ops {

namespace {

// qkv [Bw, N, 3, H, Dh]; the mask's window count is filled in by check_mask.
cpu::WindowAttentionDims check_qkv(const Tensor& qkv, const char* op) {
  detail::expect_float(qkv, op, "qkv");
  expect_contiguous(qkv, op, "qkv");
  if (qkv.ndim() != 5 || qkv.size(2) != 3)
    fail(op, ": qkv must be [Bw, N, 3, H, Dh], got ", qkv.describe());
  const cpu::WindowAttentionDims d{qkv.size(0), qkv.size(1), qkv.size(3), qkv.size(4), 0};
  if (d.tokens < 1 || d.heads < 1 || d.head_dim < 1)
    fail(op, ": qkv ", qkv.shape().str(), " needs N, H, Dh >= 1");
  // The host kernels hold one block of score rows on the stack.
  if (qkv.device() == Device::cpu && d.tokens > cpu::kWindowAttentionMaxTokens)
    fail(op, ": N = ", d.tokens, " tokens per window exceeds the CPU kernel's limit of ",
         cpu::kWindowAttentionMaxTokens);
  detail::blas_dim(3 * d.heads * d.head_dim, op);  // the GEMMs' leading dimension
  return d;
}

Shape out_shape(const cpu::WindowAttentionDims& d) {
  return {d.windows, d.tokens, d.heads, d.head_dim};
}
Shape probs_shape(const cpu::WindowAttentionDims& d) {
  return {d.windows, d.heads, d.tokens, d.tokens};
}

// index: i32 [N, N] (timm's relative_position_index) or [N N].
void check_index(const Tensor& index, const Tensor& qkv, const cpu::WindowAttentionDims& d,
                 const char* op) {
  expect_same_device(index, qkv, op);
  expect_dtype(index, DType::i32, op, "index");
  expect_contiguous(index, op, "index");
  const int64_t n = d.tokens;
  if (!(index.shape() == Shape{n, n} || index.shape() == Shape{n * n}))
    fail(op, ": index must be [N, N] or [N N] with N = ", n, ", got ", index.describe());
}

// A bad index would read or write outside the table, so on the CPU every
// entry is checked before a kernel runs.
void check_index_values(const Tensor& index, int64_t rows, const char* op, const char* table_arg) {
  const int32_t* p = index.data<int32_t>();
  for (int64_t i = 0; i < index.numel(); ++i)
    if (p[i] < 0 || p[i] >= rows)
      fail(op, ": index[", i, "] = ", p[i], " is out of range (valid: 0 to ", rows - 1, ", ",
           table_arg, " has ", rows, " rows)");
}

// mask [nW, N, N] with Bw a multiple of nW, or ndim 0 for none.
void check_mask(const Tensor& mask, const Tensor& qkv, cpu::WindowAttentionDims& d,
                const char* op) {
  if (mask.ndim() == 0) return;
  detail::expect_like(mask, qkv, op, "mask");
  if (mask.ndim() != 3 || mask.size(0) < 1)
    fail(op, ": mask must be [nW, N, N] (or a default Tensor() for none), got ",
         mask.describe());
  expect_shape(mask, Shape{mask.size(0), d.tokens, d.tokens}, op, "mask");
  if (d.windows % mask.size(0) != 0)
    fail(op, ": Bw = ", d.windows, " windows is not a multiple of the mask's nW = ",
         mask.size(0), " (window b reads mask[b mod nW])");
  d.mask_windows = mask.size(0);
}

void check_scale(double scale, const char* op) {
  if (!std::isfinite(scale)) fail(op, ": scale must be finite, got ", scale);
}

// The two products per (window, head) of N x N x Dh multiply-adds each.
double products_flops(const cpu::WindowAttentionDims& d, int products) {
  return 2.0 * products * static_cast<double>(d.windows * d.heads) *
         static_cast<double>(d.tokens * d.tokens) * static_cast<double>(d.head_dim);
}

}  // namespace

void window_attention_forward(const Tensor& qkv, const Tensor& table, const Tensor& index,
                              const Tensor& mask, double scale, Tensor& out, Tensor& probs) {
  constexpr const char* op = "window_attention_forward";
  cpu::WindowAttentionDims d = check_qkv(qkv, op);
  detail::expect_like(table, qkv, op, "table");
  if (table.ndim() != 2 || table.size(0) < 1 || table.size(1) != d.heads)
    fail(op, ": table must be [R, H] with R >= 1 and H = ", d.heads, ", got ", table.describe());
  check_index(index, qkv, d, op);
  check_mask(mask, qkv, d, op);
  check_scale(scale, op);
  detail::expect_like_shaped(out, qkv, out_shape(d), op, "out");
  detail::expect_like_shaped(probs, qkv, probs_shape(d), op, "probs");
  detail::expect_disjoint(qkv, out, op, "qkv", "out");
  detail::expect_disjoint(qkv, probs, op, "qkv", "probs");
  detail::expect_disjoint(out, probs, op, "out", "probs");
  count_flops(products_flops(d, 2));  // q k^T, P v
  switch (detail::backend_of(qkv, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::window_attention_forward(qkv, table, index, mask, scale, out, probs));
      return;
    case detail::Backend::cpu: break;
  }
  check_index_values(index, table.size(0), op, "table");
  detail::on_float_dtype(qkv.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::window_attention_forward<T>(qkv.data<T>(), table.data<T>(), index.data<int32_t>(),
                                     d.mask_windows > 0 ? mask.data<T>() : nullptr,
                                     static_cast<T>(scale), out.data<T>(), probs.data<T>(), d);
  });
}

void window_attention_backward_input(const Tensor& dout, const Tensor& qkv, Tensor& probs,
                                     const Tensor& index, double scale, Tensor& dqkv,
                                     Tensor* dtable) {
  constexpr const char* op = "window_attention_backward_input";
  const cpu::WindowAttentionDims d = check_qkv(qkv, op);
  detail::expect_like_shaped(dout, qkv, out_shape(d), op, "dout");
  detail::expect_like_shaped(probs, qkv, probs_shape(d), op, "probs");
  check_index(index, qkv, d, op);
  check_scale(scale, op);
  detail::expect_like_shaped(dqkv, qkv, qkv.shape(), op, "dqkv");
  detail::expect_disjoint(qkv, dqkv, op, "qkv", "dqkv");
  detail::expect_disjoint(dout, dqkv, op, "dout", "dqkv");
  detail::expect_disjoint(probs, dqkv, op, "probs", "dqkv");
  if (dtable != nullptr) {
    expect_same_device(*dtable, qkv, op);
    detail::expect_accum(*dtable, qkv.dtype(), op, "dtable");
    expect_contiguous(*dtable, op, "dtable");
    if (dtable->ndim() != 2 || dtable->size(0) < 1 || dtable->size(1) != d.heads)
      fail(op, ": dtable must be [R, H] with R >= 1 and H = ", d.heads, ", got ",
           dtable->describe());
    detail::expect_disjoint(probs, *dtable, op, "probs", "dtable");
    detail::expect_disjoint(dqkv, *dtable, op, "dqkv", "dtable");
  }
  // dV = P^T dO, dP = dO v^T, dQ = dS k, dK = dS^T q.
  count_flops(products_flops(d, 4));
  switch (detail::backend_of(qkv, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(
          cuda::window_attention_backward_input(dout, qkv, probs, index, scale, dqkv, dtable));
      return;
    case detail::Backend::cpu: break;
  }
  if (dtable != nullptr) check_index_values(index, dtable->size(0), op, "dtable");
  // On the CPU accum_dtype is qkv's own dtype.
  detail::on_float_dtype(qkv.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::window_attention_backward<T>(dout.data<T>(), qkv.data<T>(), probs.data<T>(),
                                      index.data<int32_t>(), static_cast<T>(scale),
                                      dqkv.data<T>(),
                                      dtable != nullptr ? dtable->data<T>() : nullptr, d);
  });
}

}  // namespace sdp::ops
