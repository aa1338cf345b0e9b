#pragma once
// ReLU, global average pooling and the bias of a linear layer: the small
// elementwise and reduction ops around the CIFAR ResNets' convolutions.
// Reductions run in double over a fixed order, independent of the thread
// count.
#include <cstdint>

namespace sdp::cpu {

// y [n] = max(x, 0), NaN passed through (a diverged run stays visible);
// y may alias x.
template <typename T>
void relu_forward(const T* x, T* y, int64_t n);

// dx [n] = dy where y > 0, else 0; dx may alias dy.
template <typename T>
void relu_backward_input(const T* dy, const T* y, T* dx, int64_t n);

// x [planes, spatial] -> y [planes]: the mean of each plane (planes = B C,
// spatial = H W).
template <typename T>
void global_avg_pool_forward(const T* x, T* y, int64_t planes, int64_t spatial);

// dx [planes, spatial] = dy [planes] / spatial, broadcast over each plane.
template <typename T>
void global_avg_pool_backward_input(const T* dy, T* dx, int64_t planes, int64_t spatial);

// y [rows, cols] += bias [cols] per row.
template <typename T>
void bias_add_forward(T* y, const T* bias, int64_t rows, int64_t cols);

// dbias [cols] += column sums of dy [rows, cols]. Threads split columns, so
// each sum runs over the rows in order.
template <typename T>
void bias_backward_weight(const T* dy, T* dbias, int64_t rows, int64_t cols);

}  // namespace sdp::cpu
