#pragma once
// The Swin Transformer's index maps (kernels/ops.h gives the semantics):
// patchify, shifted window partition / merge, patch merging, and the mean
// over tokens. Channels-last rows of C elements are copied whole, so each
// map is a gather of contiguous rows; the mean sums in double in token order,
// independent of the thread count.
#include <cstdint>

namespace sdp::cpu {

// images [b, c, h, w] -> patches [b, h/p, w/p, c p p] (channel, row, column).
template <typename T>
void patchify(const T* images, T* patches, int64_t b, int64_t c, int64_t h, int64_t w,
              int64_t p);

// x [b, h, w, c] <-> windows [b nH nW, win win, c] with the roll by `shift`
// (ops.h): partition gathers windows from x, merge writes x back from them.
struct WindowGeometry {
  int64_t batch, height, width, channels, window, shift;
};
template <typename T>
void window_partition(const T* x, T* windows, const WindowGeometry& g);
template <typename T>
void window_merge(const T* windows, T* x, const WindowGeometry& g);

// x [b, h, w, c] -> y [b, h/2, w/2, 4c] (timm's order of the four
// neighbours), and the inverse scatter dy -> dx (overwritten).
template <typename T>
void patch_merge_forward(const T* x, T* y, int64_t b, int64_t h, int64_t w, int64_t c);
template <typename T>
void patch_merge_backward_input(const T* dy, T* dx, int64_t b, int64_t h, int64_t w,
                                int64_t c);

// x [b, l, c] -> y [b, c], the mean over l; and dx [b, l, c] = dy / l.
template <typename T>
void token_mean_forward(const T* x, T* y, int64_t b, int64_t l, int64_t c);
template <typename T>
void token_mean_backward_input(const T* dy, T* dx, int64_t b, int64_t l, int64_t c);

}  // namespace sdp::cpu
