#pragma once
// SwiGLU gate: out = silu(gate) * up, silu(g) = g * sigmoid(g).
#include <cstdint>

namespace sdp::cpu {

// gate, up, out [n] (flat: the op is elementwise)
template <typename T>
void swiglu_forward(const T* gate, const T* up, T* out, int64_t n);

// dgate, dup [n] overwritten. With s = sigmoid(g):
//   dgate = dout * up * s * (1 + g (1 - s)),  dup = dout * g * s
template <typename T>
void swiglu_backward_input(const T* dout, const T* gate, const T* up, T* dgate, T* dup,
                           int64_t n);

}  // namespace sdp::cpu
