// Dispatch for fused softmax cross-entropy. logits may be [..., V]; targets,
// losses and lse are then [...] (logits' leading dims).
#include "kernels/cpu/cross_entropy.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

namespace sdp::ops {

namespace {

// Checks logits [..., V] (V >= 1), targets [...] i32, and a per-row float
// tensor `row_stat` [...]; returns V.
int64_t check_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& row_stat,
                            const char* row_arg, const char* op) {
  detail::expect_float(logits, op, "logits");
  expect_contiguous(logits, op, "logits");
  detail::leading_rows(logits, op, "logits");
  const int64_t v = logits.size(-1);
  if (v < 1) fail(op, ": logits ", logits.describe(), " has no classes (V must be >= 1)");
  const Shape rows = detail::without_last_dim(logits);
  expect_same_device(targets, logits, op);
  expect_dtype(targets, DType::i32, op, "targets");
  expect_contiguous(targets, op, "targets");
  expect_shape(targets, rows, op, "targets");
  detail::expect_like(row_stat, logits, op, row_arg);
  expect_shape(row_stat, rows, op, row_arg);
  return v;
}

// Negative targets mean "ignore this row"; one at or above V is a data bug
// that would otherwise read outside the row.
void check_targets(const Tensor& targets, int64_t v, const char* op) {
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i)
    if (t[i] >= v)
      fail(op, ": target ", t[i], " at row ", i, " is out of range (valid: 0 to ", v - 1,
           " for V = ", v, ", or negative to ignore the row)");
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses,
                           Tensor& lse) {
  constexpr const char* op = "cross_entropy_forward";
  const int64_t v = check_cross_entropy(logits, targets, losses, "losses", op);
  detail::expect_like(lse, logits, op, "lse");
  expect_shape(lse, targets.shape(), op, "lse");
  if (!detail::runs_on_cpu(logits, op)) return;
  check_targets(targets, v, op);
  detail::on_float_dtype(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::cross_entropy_forward<T>(logits.data<T>(), targets.data<int32_t>(), losses.data<T>(),
                                  lse.data<T>(), targets.numel(), v);
  });
}

void cross_entropy_backward_input(const Tensor& logits, const Tensor& targets,
                                  const Tensor& lse, double grad_scale, Tensor& dlogits) {
  constexpr const char* op = "cross_entropy_backward_input";
  const int64_t v = check_cross_entropy(logits, targets, lse, "lse", op);
  detail::expect_like(dlogits, logits, op, "dlogits");
  expect_shape(dlogits, logits.shape(), op, "dlogits");
  if (!detail::runs_on_cpu(logits, op)) return;
  check_targets(targets, v, op);
  detail::on_float_dtype(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::cross_entropy_backward_input<T>(logits.data<T>(), targets.data<int32_t>(),
                                         lse.data<T>(), grad_scale, dlogits.data<T>(),
                                         targets.numel(), v);
  });
}

}  // namespace sdp::ops
