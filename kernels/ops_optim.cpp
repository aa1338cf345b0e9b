// Optimizer ops: AdamW and global-norm gradient clipping.
#include <cmath>
#include <initializer_list>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/grad_norm.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace sdp::ops {

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                  const AdamWConfig& config) {
  constexpr const char* op = "adamw_update";
  for (const Tensor* t : std::initializer_list<const Tensor*>{&grad, &m, &v}) {
    const char* name = t == &grad ? "grad" : t == &m ? "m" : "v";
    expect_shape(*t, param.shape(), op, name);
    expect_dtype(*t, param.dtype(), op, name);
    expect_same_device(param, *t, op);
    expect_contiguous(*t, op, name);
  }
  expect_contiguous(param, op, "param");
  if (config.step < 1) fail(op, ": step must be >= 1 (1-based), got ", config.step);
  if (!(config.lr >= 0)) fail(op, ": lr must be >= 0, got ", config.lr);
  if (!(config.beta1 >= 0 && config.beta1 < 1))
    fail(op, ": beta1 must be in [0, 1), got ", config.beta1);
  if (!(config.beta2 >= 0 && config.beta2 < 1))
    fail(op, ": beta2 must be in [0, 1), got ", config.beta2);
  if (!(config.eps > 0)) fail(op, ": eps must be > 0, got ", config.eps);
  if (!(config.weight_decay >= 0))
    fail(op, ": weight_decay must be >= 0, got ", config.weight_decay);
  if (!detail::runs_on_cpu(param, op)) return;
  const double step = static_cast<double>(config.step);
  const cpu::AdamWScalars s{config.lr,
                            config.beta1,
                            config.beta2,
                            config.eps,
                            config.weight_decay,
                            1.0 - std::pow(config.beta1, step),
                            1.0 - std::pow(config.beta2, step)};
  detail::on_float_dtype(param.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::adamw_update<T>(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(),
                         param.numel(), s);
  });
}

double global_norm(std::span<const Tensor> tensors) {
  constexpr const char* op = "global_norm";
  double total = 0;
  for (const Tensor& t : tensors) {
    expect_contiguous(t, op, "tensor");
    expect_same_device(tensors.front(), t, op);
    if (!detail::runs_on_cpu(t, op)) continue;
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
      if (!detail::runs_on_cpu(t, op)) continue;
      detail::on_float_dtype(t.dtype(), op, [&](auto zero) {
        using T = decltype(zero);
        cpu::grad_scale<T>(t.data<T>(), t.numel(), factor);
      });
    }
  }
  return norm;
}

}  // namespace sdp::ops
