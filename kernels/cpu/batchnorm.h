#pragma once
// Batch normalization over (B, H, W) per channel of NCHW activations, viewed
// as [B, C, S] with S = H W. Per-channel sums run in double over a fixed
// order (image by image), so results do not depend on the thread count;
// threads split channels.
#include <cstdint>

namespace sdp::cpu {

struct BatchNormDims {
  int64_t batch = 0, channels = 0, spatial = 0;  // B, C, S = H W
};

// Training forward, x, y [B, C, S]; weight, bias, save_mean, save_invstd,
// running_mean, running_var [C]. Two passes per channel (mean, then the
// squared deviations from it): stable for large means. The running variance
// moves toward the unbiased variance (n / (n - 1), n = B S; the biased one
// when n = 1). Nothing is written when n = 0. running_mean and running_var
// may both be null: the batch statistics only, nothing else written
// (a recomputation).
template <typename T>
void batchnorm_forward_train(const T* x, const T* weight, const T* bias, double eps,
                             double momentum, T* y, T* save_mean, T* save_invstd,
                             T* running_mean, T* running_var, const BatchNormDims& d);

// y = (x - running_mean) / sqrt(running_var + eps) * weight + bias.
template <typename T>
void batchnorm_forward_eval(const T* x, const T* weight, const T* bias, const T* running_mean,
                            const T* running_var, double eps, T* y, const BatchNormDims& d);

// dx = weight invstd (dy - mean(dy) - xhat mean(dy xhat)), xhat = (x - mean)
// invstd; dx may alias dy (each channel's sums are taken before it is written).
template <typename T>
void batchnorm_backward_input(const T* dy, const T* x, const T* weight, const T* save_mean,
                              const T* save_invstd, T* dx, const BatchNormDims& d);

// dweight += sum(dy xhat), dbias += sum(dy).
template <typename T>
void batchnorm_backward_weight(const T* dy, const T* x, const T* save_mean, const T* save_invstd,
                               T* dweight, T* dbias, const BatchNormDims& d);

}  // namespace sdp::cpu
