// Dispatch for SwiGLU. The op is elementwise, so gate/up/out may have any
// (equal) shape; [N, F] is the usual one.
#include "kernels/cpu/swiglu.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

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
  if (!detail::runs_on_cpu(gate, op)) return;
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
  if (!detail::runs_on_cpu(gate, op)) return;
  detail::on_float_dtype(gate.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::swiglu_backward_input<T>(dout.data<T>(), gate.data<T>(), up.data<T>(), dgate.data<T>(),
                                  dup.data<T>(), gate.numel());
  });
}

}  // namespace sdp::ops
