// The global gradient norm over a list of tensors and clipping by it.
#include <cmath>
#include <span>

#include "kernels/cpu/grad_norm.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace sdp::ops {

double global_norm(std::span<const Tensor> tensors) {
  constexpr const char* op = "global_norm";
  double total = 0;
  for (const Tensor& t : tensors) {
    expect_contiguous(t, op, "tensor");
    expect_same_device(tensors.front(), t, op);
    switch (detail::backend_of(t, op)) {
      case detail::Backend::meta: continue;
      // ops::sum_squares holds the device reduction; only the host sums here.
      case detail::Backend::cuda: total += sum_squares(t); continue;
      case detail::Backend::cpu: break;
    }
    detail::on_float_dtype(t.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      total += cpu::grad_sum_squares<T>(t.data<T>(), t.numel());
    });
  }
  return std::sqrt(total);
}

double clip_grad_norm(std::span<Tensor> grads, double max_norm) {
  constexpr const char* op = "clip_grad_norm";
  if (!(max_norm > 0)) fail(op, ": max_norm must be > 0, got ", max_norm);
  const double norm = global_norm(std::span<const Tensor>(grads.data(), grads.size()));
  if (norm > max_norm) {
    const double factor = max_norm / (norm + 1e-6);
    for (Tensor& t : grads) {
      switch (detail::backend_of(t, op)) {
        case detail::Backend::meta: continue;
        case detail::Backend::cuda: scale(t, factor); continue;
        case detail::Backend::cpu: break;
      }
      detail::on_float_dtype(t.dtype(), op, [&](auto zero) {
        using T = decltype(zero);
        cpu::grad_scale<T>(t.data<T>(), t.numel(), factor);
      });
    }
  }
  return norm;
}

}  // namespace sdp::ops
