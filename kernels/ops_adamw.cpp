// AdamW: per tensor, and multi-tensor over segments of a flat buffer (with
// an optional bf16 copy of the updated values).
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <numeric>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/adamw.h"
#endif

namespace sdp::ops {

namespace {

// param (the master values), grad, m, v: one shape, one device, contiguous,
// and one dtype: f32 or f64 on the CPU (and meta), f32 on CUDA, where the
// master weights and optimizer state of mixed precision are f32.
void check_adamw_buffers(const Tensor& param, const Tensor& grad, const Tensor& m,
                         const Tensor& v, const char* op) {
  const DType d = param.dtype();
  if (param.device() == Device::cuda) {
    if (d != DType::f32)
      fail(op, ": param has dtype ", dtype_name(d),
           " (valid on CUDA: f32; bf16 parameters are updated through their f32 master "
           "copy, see adamw_update_segments)");
  } else if (d != DType::f32 && d != DType::f64) {
    fail(op, ": param has dtype ", dtype_name(d), " (valid: f32, f64)");
  }
  expect_contiguous(param, op, "param");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&grad, &m, &v}) {
    const char* name = t == &grad ? "grad" : t == &m ? "m" : "v";
    expect_shape(*t, param.shape(), op, name);
    expect_dtype(*t, d, op, name);
    expect_same_device(param, *t, op);
    expect_contiguous(*t, op, name);
  }
}

// The hyperparameters every AdamW call shares (weight decay is checked
// where it comes from: the config or each segment).
void check_adamw_config(const AdamWConfig& config, const char* op) {
  if (config.step < 1) fail(op, ": step must be >= 1 (1-based), got ", config.step);
  if (!(config.lr >= 0)) fail(op, ": lr must be >= 0, got ", config.lr);
  if (!(config.beta1 >= 0 && config.beta1 < 1))
    fail(op, ": beta1 must be in [0, 1), got ", config.beta1);
  if (!(config.beta2 >= 0 && config.beta2 < 1))
    fail(op, ": beta2 must be in [0, 1), got ", config.beta2);
  if (!(config.eps > 0)) fail(op, ": eps must be > 0, got ", config.eps);
}

// Segments lie inside [0, n), have a weight decay >= 0, and do not overlap.
void check_segments(std::span<const AdamWSegment> segments, int64_t n, const char* op) {
  for (size_t i = 0; i < segments.size(); ++i) {
    const AdamWSegment& s = segments[i];
    if (s.offset < 0 || s.numel < 0 || s.offset > n || s.numel > n - s.offset)
      fail(op, ": segment ", i, " (offset ", s.offset, ", numel ", s.numel,
           ") is outside the buffer of ", n,
           " elements (valid: offset >= 0, numel >= 0, offset + numel <= ", n, ")");
    if (!(s.weight_decay >= 0) || !std::isfinite(s.weight_decay))
      fail(op, ": segment ", i, " has weight_decay ", s.weight_decay,
           " (valid: a finite value >= 0)");
  }
  std::vector<size_t> order(segments.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return segments[a].offset < segments[b].offset;
  });
  const AdamWSegment* previous = nullptr;
  size_t previous_index = 0;
  for (size_t i : order) {
    const AdamWSegment& s = segments[i];
    if (s.numel == 0) continue;  // covers nothing, overlaps nothing
    if (previous != nullptr && previous->offset + previous->numel > s.offset)
      fail(op, ": segments ", previous_index, " [", previous->offset, ", ",
           previous->offset + previous->numel, ") and ", i, " [", s.offset, ", ",
           s.offset + s.numel, ") overlap; each element may belong to one segment only");
    previous = &s;
    previous_index = i;
  }
}

// The low-precision copy: bf16, param's numel and device, contiguous.
void check_copy(const Tensor& copy, const Tensor& param, const char* op) {
  expect_same_device(copy, param, op);
  expect_dtype(copy, DType::bf16, op, "low_precision_copy");
  expect_contiguous(copy, op, "low_precision_copy");
  if (copy.numel() != param.numel())
    fail(op, ": low_precision_copy has ", copy.numel(), " elements (", copy.describe(),
         "), param has ", param.numel(), "; they must match");
}

cpu::AdamWScalars cpu_scalars(const AdamWConfig& config, double weight_decay) {
  const double step = static_cast<double>(config.step);
  return cpu::AdamWScalars{config.lr,
                           config.beta1,
                           config.beta2,
                           config.eps,
                           weight_decay,
                           1.0 - std::pow(config.beta1, step),
                           1.0 - std::pow(config.beta2, step)};
}

#ifdef SDP_HAVE_CUDA
cuda::AdamWStep cuda_step(const AdamWConfig& config) {
  return cuda::AdamWStep{config.lr, config.beta1, config.beta2, config.eps, config.step};
}
#endif

}  // namespace

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                  const AdamWConfig& config) {
  constexpr const char* op = "adamw_update";
  check_adamw_buffers(param, grad, m, v, op);
  check_adamw_config(config, op);
  if (!(config.weight_decay >= 0))
    fail(op, ": weight_decay must be >= 0, got ", config.weight_decay);
  switch (detail::backend_of(param, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::adamw_update(param, grad, m, v, cuda_step(config), config.weight_decay));
      return;
    case detail::Backend::cpu: break;
  }
  const cpu::AdamWScalars s = cpu_scalars(config, config.weight_decay);
  detail::on_float_dtype(param.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::adamw_update<T>(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(),
                         param.numel(), s);
  });
}

void adamw_update_segments(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                           std::span<const AdamWSegment> segments, const AdamWConfig& config,
                           Tensor* low_precision_copy) {
  constexpr const char* op = "adamw_update_segments";
  check_adamw_buffers(param, grad, m, v, op);
  check_adamw_config(config, op);
  check_segments(segments, param.numel(), op);
  if (low_precision_copy != nullptr) check_copy(*low_precision_copy, param, op);
  switch (detail::backend_of(param, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: {
#ifdef SDP_HAVE_CUDA
      std::vector<cuda::AdamWRange> ranges;
      ranges.reserve(segments.size());
      for (const AdamWSegment& s : segments)
        ranges.push_back(cuda::AdamWRange{s.offset, s.numel, s.weight_decay});
      cuda::adamw_update_segments(param, grad, m, v, ranges, cuda_step(config),
                                  low_precision_copy);
#endif
      return;
    }
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(param.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    T* p = param.data<T>();
    for (const AdamWSegment& s : segments) {
      if (s.numel == 0) continue;
      cpu::adamw_update<T>(p + s.offset, grad.data<T>() + s.offset, m.data<T>() + s.offset,
                           v.data<T>() + s.offset, s.numel, cpu_scalars(config, s.weight_decay));
      if (low_precision_copy != nullptr)
        cpu::round_to_bf16<T>(p + s.offset, low_precision_copy->data<bf16>() + s.offset,
                              s.numel);
    }
  });
}

}  // namespace sdp::ops
