// Dispatch for the token embedding. tokens may have any shape [...] (N =
// numel); out is then [..., D], e.g. tokens [B, T] gives out [B, T, D].
// Dtypes: table and out (or dout) hold the activation dtype; dtable, a weight
// gradient, holds accum_dtype of it (f32 next to bf16).
#include "kernels/cpu/embedding.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/embedding.h"
#endif

namespace sdp::ops {

namespace {

// Checks tokens [...] i32 against a [V, D] table argument (dtype checked by
// the caller) and rows [..., D] of an activation dtype.
void check_embedding(const Tensor& tokens, const Tensor& table, const Tensor& rows,
                     const char* op, const char* table_arg, const char* rows_arg) {
  expect_dtype(tokens, DType::i32, op, "tokens");
  expect_contiguous(tokens, op, "tokens");
  expect_same_device(tokens, table, op);
  expect_same_device(tokens, rows, op);
  expect_contiguous(table, op, table_arg);
  if (table.ndim() != 2) fail(op, ": ", table_arg, " must be [V, D], got ", table.describe());
  detail::expect_float(rows, op, rows_arg);
  expect_contiguous(rows, op, rows_arg);
  Shape expected(tokens.shape().begin(), tokens.shape().end());
  expected.push_back(table.size(1));
  expect_shape(rows, expected, op, rows_arg);
}

// A bad token would read or write outside the table, so on the CPU every one
// is checked before any kernel runs (CUDA checks them in the kernel:
// kernels/cuda/embedding.h).
void check_tokens(const Tensor& tokens, int64_t vocab, const char* op) {
  const int32_t* t = tokens.data<int32_t>();
  for (int64_t i = 0; i < tokens.numel(); ++i)
    if (t[i] < 0 || t[i] >= vocab)
      fail(op, ": token ", t[i], " at position ", i, " is out of range (valid: 0 to ",
           vocab - 1, ", the table has ", vocab, " rows)");
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& table, Tensor& out) {
  constexpr const char* op = "embedding_forward";
  detail::expect_float(table, op, "table");
  check_embedding(tokens, table, out, op, "table", "out");
  expect_dtype(out, table.dtype(), op, "out");
  switch (detail::backend_of(table, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::embedding_forward(tokens, table, out)); return;
    case detail::Backend::cpu: break;
  }
  check_tokens(tokens, table.size(0), op);
  detail::on_float_dtype(table.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::embedding_forward<T>(tokens.data<int32_t>(), table.data<T>(), out.data<T>(),
                              tokens.numel(), table.size(1));
  });
}

void embedding_backward_weight(const Tensor& tokens, const Tensor& dout, Tensor& dtable) {
  constexpr const char* op = "embedding_backward_weight";
  check_embedding(tokens, dtable, dout, op, "dtable", "dout");
  detail::expect_accum(dtable, dout.dtype(), op, "dtable");
  switch (detail::backend_of(dtable, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::embedding_backward_weight(tokens, dout, dtable));
      return;
    case detail::Backend::cpu: break;
  }
  check_tokens(tokens, dtable.size(0), op);
  // On the CPU accum_dtype is the activation dtype itself.
  detail::on_float_dtype(dtable.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::embedding_backward_weight<T>(tokens.data<int32_t>(), dout.data<T>(), dtable.data<T>(),
                                      tokens.numel(), dtable.size(1));
  });
}

}  // namespace sdp::ops
