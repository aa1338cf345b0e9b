#pragma once
// 3 x 3 stride-1 convolution by Winograd's minimal filtering F(2 x 2, 3 x 3):
// each 2 x 2 output tile is A^T [(G g G^T) . (B^T d B)] A for the 4 x 4 input
// window d it reads, so the products become 16 GEMMs of
// [Cout, Cin] x [Cin, tiles], one per transform point: 16 / 4 = 4 multiplies
// per output against 9 for im2col, 2.25x fewer. The transforms' entries are
// 0, +-1 and +-1/2, so rounding stays close to the direct sum's.
//
//   forward        : y tile = A^T [U . V] A, U = G g G^T, V = B^T d B
//   backward input : the forward of dy with the kernel flipped and its
//                    channels swapped (padding 2 - p): what a transposed conv is
//   backward weight: dg = G^T [sum over tiles (A dy A^T) . V] G
//
// The batch is walked in blocks of a few hundred tiles (whole small images, or
// tile rows of a large one); output channels in blocks that bound the
// transformed weights. Block sizes depend on the shapes only, so the sums'
// order does not depend on the thread count.
#include <cstdint>

#include "kernels/cpu/conv2d.h"

namespace sdp::cpu {

// k = 3, stride 1, padding 0..2 (backward input needs 2 - padding >= 0).
bool winograd_applies(const Conv2dDims& d);

// Workspace elements (of T) the three kernels need, the largest of the three.
int64_t winograd_workspace_elems(const Conv2dDims& d);

// Same contracts as conv2d_forward / conv2d_backward_input /
// conv2d_backward_weight in conv2d.h.
template <typename T>
void winograd_forward(const T* x, const T* w, T* y, T* workspace, const Conv2dDims& d,
                      bool accumulate);
template <typename T>
void winograd_backward_input(const T* dy, const T* w, T* dx, T* workspace, const Conv2dDims& d,
                             bool accumulate);
template <typename T>
void winograd_backward_weight(const T* dy, const T* x, T* dw, T* workspace,
                              const Conv2dDims& d);

}  // namespace sdp::cpu
