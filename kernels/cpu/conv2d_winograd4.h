#pragma once
// 3 x 3 stride-1 convolution by Winograd's F(4 x 4, 3 x 3): each 4 x 4
// output tile is A^T [(G g G^T) . (B^T d B)] A for the 6 x 6 input window d
// it reads, so the products become 36 GEMMs of [Cout, Cin] x [Cin, tiles],
// one per transform point: 36 / 16 = 2.25 multiplies per output against 9
// for im2col (4x fewer) and 4 for F(2 x 2, 3 x 3) (conv2d_winograd.h).
// Interpolation points 0, +-1, +-2 and infinity: the transforms' entries are
// small integers and 1/4, 1/6, 1/12, 1/24. The price is f32 accuracy: in
// the f32-against-f64 test cases the largest error is 2.5e-6 to 5.4e-6 of
// the largest output or gradient (Cin 4 to 48), against 2e-7 to 3e-7 for
// F(2 x 2) and im2col (the largest at Cin 48: expect more with more channels).
//
// Same three passes as F(2 x 2): forward, backward input as the forward of
// the transposed conv (kernel flipped, channels swapped, padding 2 - p),
// backward weight dg = G^T [sum over tiles (A dy A^T) . V] G. Blocks of
// tiles and of output channels depend on the shapes only, so the sums'
// order does not depend on the thread count.
#include <cstdint>

#include "kernels/cpu/conv2d.h"

namespace sdp::cpu {

// Where F(4 x 4) runs instead of F(2 x 2): k = 3, stride 1, padding 0..2,
// and outputs at least 8 x 8 both ways. On 4 x 4 planes (one tile per image)
// its GEMMs get few columns and its transforms run one tile per vector, and
// F(2 x 2) measured faster (bench_conv, the 512-channel layer).
bool winograd4_applies(const Conv2dDims& d);

// Workspace elements (of T) the three kernels need, the largest of the three.
int64_t winograd4_workspace_elems(const Conv2dDims& d);

// Same contracts as conv2d_forward / conv2d_backward_input /
// conv2d_backward_weight in conv2d.h.
template <typename T>
void winograd4_forward(const T* x, const T* w, T* y, T* workspace, const Conv2dDims& d,
                       bool accumulate);
template <typename T>
void winograd4_backward_input(const T* dy, const T* w, T* dx, T* workspace,
                              const Conv2dDims& d, bool accumulate);
template <typename T>
void winograd4_backward_weight(const T* dy, const T* x, T* dw, T* workspace,
                               const Conv2dDims& d);

}  // namespace sdp::cpu
