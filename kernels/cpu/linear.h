#pragma once
// Bias-free linear layer in the Hugging Face layout (w [out, in]), on BLAS.
// Dimensions are ints because that is what CBLAS takes; the dispatch layer
// checks they fit.
namespace sdp::cpu {

// y [n, out] = x [n, in] w^T
template <typename T>
void linear_forward(const T* x, const T* w, T* y, int n, int in, int out);

// dx [n, in] = dy [n, out] w, overwritten.
template <typename T>
void linear_backward_input(const T* dy, const T* w, T* dx, int n, int in, int out);

// dw [out, in] += dy^T x
template <typename T>
void linear_backward_weight(const T* dy, const T* x, T* dw, int n, int in, int out);

}  // namespace sdp::cpu
