// Dispatch for fused softmax cross-entropy. logits may be [..., V]; targets,
// losses and lse are then [...] (logits' leading dims).
#include "kernels/cpu/cross_entropy.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/cross_entropy.h"
#endif

namespace sdp::ops {

namespace {

// A per-row statistic (losses, lse) of logits [..., V]: [...] and
// accum_dtype(logits), i.e. f32 next to bf16 logits, else the logits' dtype.
void check_row_stat(const Tensor& stat, const Tensor& logits, const char* arg, const char* op) {
  expect_same_device(stat, logits, op);
  detail::expect_accum(stat, logits.dtype(), op, arg);
  expect_contiguous(stat, op, arg);
  expect_shape(stat, detail::without_last_dim(logits), op, arg);
}

// Checks logits [..., V] (V >= 1), targets [...] i32, and the per-row
// statistic `row_stat` [...]; returns V.
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
  check_row_stat(row_stat, logits, row_arg, op);
  return v;
}

// Negative targets mean "ignore this row"; one at or above V is a data bug
// that would otherwise read outside the row. Host tensors only: the CUDA
// kernels check device targets themselves (cuda/cross_entropy.h).
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
  check_row_stat(lse, logits, "lse", op);
  switch (detail::backend_of(logits, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::cross_entropy_forward(logits, targets, losses, lse));
      return;
    case detail::Backend::cpu: break;
  }
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
  switch (detail::backend_of(logits, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::cross_entropy_backward_input(logits, targets, lse, grad_scale, dlogits));
      return;
    case detail::Backend::cpu: break;
  }
  check_targets(targets, v, op);
  detail::on_float_dtype(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::cross_entropy_backward_input<T>(logits.data<T>(), targets.data<int32_t>(),
                                         lse.data<T>(), grad_scale, dlogits.data<T>(),
                                         targets.numel(), v);
  });
}

}  // namespace sdp::ops
