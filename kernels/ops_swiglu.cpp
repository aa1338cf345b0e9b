// Dispatch for SwiGLU. The op is elementwise, so gate/up/out may have any
// (equal) shape; [N, F] is the usual one. All tensors share one dtype (the
// activation dtype). dgate and dup may alias dout, gate or up: each element
// is read before it is written, on every device.
#include "kernels/cpu/swiglu.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/swiglu.h"
#endif

namespace sdp::ops {

namespace {
void check_same(const Tensor& t, const Tensor& gate, const char* op, const char* arg) {
  detail::expect_like(t, gate, op, arg);
  expect_shape(t, gate.shape(), op, arg);
}
void check_gate(const Tensor& gate, const char* op) {
  detail::expect_float(gate, op, "gate");
  expect_contiguous(gate, op, "gate");
}
}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  constexpr const char* op = "swiglu_forward";
  check_gate(gate, op);
  check_same(up, gate, op, "up");
  check_same(out, gate, op, "out");
  switch (detail::backend_of(gate, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::swiglu_forward(gate, up, out)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(gate.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::swiglu_forward<T>(gate.data<T>(), up.data<T>(), out.data<T>(), gate.numel());
  });
}

void swiglu_backward_input(const Tensor& dout, const Tensor& gate, const Tensor& up,
                           Tensor& dgate, Tensor& dup) {
  constexpr const char* op = "swiglu_backward_input";
  check_gate(gate, op);
  check_same(dout, gate, op, "dout");
  check_same(up, gate, op, "up");
  check_same(dgate, gate, op, "dgate");
  check_same(dup, gate, op, "dup");
  switch (detail::backend_of(gate, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::swiglu_backward_input(dout, gate, up, dgate, dup));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(gate.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::swiglu_backward_input<T>(dout.data<T>(), gate.data<T>(), up.data<T>(), dgate.data<T>(),
                                  dup.data<T>(), gate.numel());
  });
}

}  // namespace sdp::ops
