#pragma once
// CUDA batch normalization over (B, H, W) per channel (arguments checked by
// kernels/ops_batchnorm.cpp first). x, y, dy, dx [B, C, ...] (any trailing
// spatial dims, none for [B, C]) and weight, bias [C] hold the activation
// dtype (f32 or bf16); save_mean, save_invstd, running_mean, running_var,
// dweight, dbias [C] hold f32 (accum_dtype). Statistics are computed in f32.
//
// The per-channel sums run in one block per channel, in a fixed order: the
// same input gives the same bits on every run (no atomics anywhere).
#include "engine/core/tensor.h"

namespace sdp::cuda {

// y = (x - mean) invstd weight + bias with the batch's mean and biased
// variance; saves mean and invstd = 1/sqrt(var + eps); moves the running
// statistics by `momentum` toward the mean and the unbiased variance (the
// biased one when a channel has a single element).
void batchnorm_forward_train(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                             double momentum, Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                             Tensor& running_mean, Tensor& running_var);
// The same y, save_mean and save_invstd as batchnorm_forward_train; the
// running statistics are not touched (a recomputation).
void batchnorm_forward_batch_stats(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   double eps, Tensor& y, Tensor& save_mean, Tensor& save_invstd);
// y = (x - running_mean) / sqrt(running_var + eps) weight + bias; y may alias x.
void batchnorm_forward_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, double eps,
                            Tensor& y);
// dx = weight invstd (dy - mean(dy) - xhat mean(dy xhat)), xhat = (x - mean) invstd,
// means over the channel's elements; dx may alias dy.
void batchnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx);
// dweight += sum(dy xhat), dbias += sum(dy) per channel.
void batchnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                               const Tensor& save_invstd, Tensor& dweight, Tensor& dbias);

}  // namespace sdp::cuda
