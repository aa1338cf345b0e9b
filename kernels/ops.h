#pragma once
// The one op API. Every op dispatches on the device of its tensors:
//   cpu  -> kernels/cpu (templates over float and double),
//   meta -> nothing is computed (shapes are still checked), so a full step on
//           the meta device costs no arithmetic,
//   cuda -> kernels/cuda (launched on cuda::compute_stream(); in a build
//           without a CUDA toolkit, a clear error).
// Conventions: input gradients (backward_input) overwrite their outputs;
// weight gradients (backward_weight) accumulate (+=) into theirs. All tensors
// of one call share a device; token and target tensors are i32. Outputs are
// preallocated by the caller: no op allocates, so the caller's allocator sees
// every byte.
// Dtypes: activations and parameters are f32 or f64 on the CPU, f32 or bf16
// on CUDA (any of these on meta). Statistics (rstd, lse, losses), RoPE
// tables and weight gradients are accum_dtype(activation dtype): f32 next to
// bf16 (mixed precision), otherwise the activation dtype itself.
#include <cstdint>
#include <span>

#include "engine/core/tensor.h"

namespace sdp::ops {

// ---- utilities --------------------------------------------------------------
void fill(Tensor& x, double value);
void copy(const Tensor& src, Tensor& dst);                       // same shape
void add(const Tensor& a, const Tensor& b, Tensor& out);          // out = a + b; out may alias
void accumulate(Tensor& acc, const Tensor& x);                   // acc += x
void scale(Tensor& x, double alpha);                             // x *= alpha
double sum_squares(const Tensor& x);                              // sum x^2 (0 on meta)
double sum(const Tensor& x);                                      // sum x, in double (0 on meta)
// Elements >= 0 of an i32 tensor (valid targets); numel on meta.
int64_t count_nonnegative(const Tensor& x);
// Same shape and dtype, any two devices (cpu <-> cuda, or within one); both
// contiguous. Waits until the copy is done when either side is the host.
// Nothing happens when either side is meta.
void transfer(const Tensor& src, Tensor& dst);
// Waits until every op queued on `device` has run (no-op on cpu and meta).
void synchronize(Device device);
// Same device and shape, dtype converted (f32, f64, bf16; rounding to
// nearest even into bf16).
void convert(const Tensor& src, Tensor& dst);
// Reads one element as double (tests, loss readout); NaN on meta.
double item(const Tensor& x, int64_t index = 0);

// ---- embedding --------------------------------------------------------------
// tokens [N] i32, table [V, D], out [N, D]. A token outside [0, V) is an error.
void embedding_forward(const Tensor& tokens, const Tensor& table, Tensor& out);
// dtable [V, D] += scatter of dout [N, D] by tokens.
void embedding_backward_weight(const Tensor& tokens, const Tensor& dout, Tensor& dtable);

// ---- RMSNorm: y = x * rstd * weight, rstd = 1/sqrt(mean(x^2) + eps) ------------
// x, y [N, D]; weight [D]; rstd [N] is saved for backward.
void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, Tensor& y,
                     Tensor& rstd);
void rmsnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                            const Tensor& rstd, Tensor& dx);
void rmsnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& rstd,
                             Tensor& dweight);

// ---- linear, no bias, Hugging Face layout: y = x w^T ---------------------------
// x [N, in], w [out, in], y [N, out]
void linear_forward(const Tensor& x, const Tensor& w, Tensor& y);
void linear_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx);    // dx = dy w
void linear_backward_weight(const Tensor& dy, const Tensor& x, Tensor& dw);   // dw += dy^T x

// ---- rotary position embedding, rotate-half convention (HF LLaMA) -------------
// For pair (i, i + Dh/2), i < Dh/2, at position t with angle a = t * theta^(-2i/Dh):
//   y[i] = x[i] cos a - x[i + Dh/2] sin a;  y[i + Dh/2] = x[i + Dh/2] cos a + x[i] sin a
// cos, sin [T, Dh/2] are filled once by rope_tables (computed in double).
void rope_tables(double theta, Tensor& cos, Tensor& sin);
// x, y [B, T, H, Dh]; y may alias x.
void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y);
// The transpose rotation; dx may alias dy.
void rope_backward_input(const Tensor& dy, const Tensor& cos, const Tensor& sin, Tensor& dx);

// ---- causal self-attention with grouped-query heads ---------------------------
// q [B, T, Hq, Dh]; k, v [B, T, Hkv, Dh] with Hq % Hkv == 0 (query head h reads
// kv head h / (Hq / Hkv)); out [B, T, Hq, Dh]; scale 1/sqrt(Dh).
// Only lse [B, Hq, T] (log-sum-exp of each score row) is saved: backward
// recomputes the probabilities, so no [T, T] tensor per head outlives a call.
// workspace: scratch of attention_workspace_elems(...) elements of q's dtype;
// `device` is where the op will run (a meta dry run passes the device it
// mirrors, Allocator::target_device()).
int64_t attention_workspace_elems(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t Dh,
                                  Device device = Device::cpu);
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                       Tensor& lse, Tensor& workspace);
// dq, dk, dv are overwritten.
void attention_backward_input(const Tensor& dout, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& lse,
                              Tensor& dq, Tensor& dk, Tensor& dv, Tensor& workspace);

// ---- SwiGLU: out = silu(gate) * up, silu(g) = g / (1 + e^-g) ------------------
// gate, up, out [N, F]
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out);
void swiglu_backward_input(const Tensor& dout, const Tensor& gate, const Tensor& up,
                           Tensor& dgate, Tensor& dup);

// ---- fused softmax cross-entropy ---------------------------------------------
// logits [N, V]; targets [N] i32 in [0, V), or negative to ignore that row.
// losses [N] (0 where ignored) and lse [N] are written. No probabilities are
// stored: backward recomputes them from logits and lse.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses,
                           Tensor& lse);
// dlogits = (softmax(logits) - onehot(target)) * grad_scale (0 for ignored rows).
// dlogits may alias logits (the logits are then consumed).
void cross_entropy_backward_input(const Tensor& logits, const Tensor& targets,
                                  const Tensor& lse, double grad_scale, Tensor& dlogits);

// ---- top-k accuracy -------------------------------------------------------------
// For each k of `ks` (ascending, each >= 1, at most kMaxTopK of them):
// correct[i] = rows of logits [..., V] whose target (targets [...] i32, as
// cross_entropy_forward's) is among the ks[i] largest logits of its row. A
// target ranks after every larger logit and after equal logits of lower
// classes (ties go to the lower class, as argmax's first maximum); rows with
// a negative target are ignored; a row holding a NaN logit is never correct.
// All zero on meta. On CUDA a small kernel counts on the device and the
// counts are read back (waits for the stream; an out-of-range target,
// which cross_entropy_forward turns into a NaN loss there, counts as wrong).
// No buffer is allocated: the counts live in a fixed device array.
inline constexpr int kMaxTopK = 4;
void count_top_k(const Tensor& logits, const Tensor& targets, std::span<const int> ks,
                 std::span<int64_t> correct);

// ---- convolution (NCHW), for the CIFAR ResNets --------------------------------
// x [B, Cin, H, W], w [Cout, Cin, k, k], y [B, Cout, Ho, Wo] with
// Ho = (H + 2 padding - k) / stride + 1 (likewise Wo); square kernels, equal
// stride and zero padding on both axes; no bias (every conv is followed by a
// BatchNorm). All contiguous, one dtype (weight gradients: accum dtype).
// workspace: [n] of x's dtype with n >= conv2d_workspace_elems(...) for the
// device the op will run on (a meta dry run passes the device it mirrors;
// Device::meta itself gets the larger of the cpu and cuda sizes). One
// workspace serves all three calls of a geometry. The caller allocates it
// (category workspace), so the allocator sees every byte. The ops check its
// size on cpu and cuda; on meta only its dtype (a meta tensor does not say
// which device its dry run mirrors).
//   cpu : 3x3 stride-1 convs run as Winograd F(2x2, 3x3): the transforms of
//         one block of ~512 output tiles and of a block of weights; the
//         others as im2col + GEMM: one block of ~512 output pixels. A
//         function of the shapes alone, at most ~11 MiB of f32 for the CIFAR
//         ResNet-18 layers, none for pointwise convs (k 1, stride 1, pad 0).
//   cuda: algo + staging elements. algo = min(B Cin k k Ho Wo,
//         64 MiB / dtype size) for cuDNN (its fastest algorithm that fits is
//         chosen); staging = Cout Cin k k in bf16 runs (a bf16 weight
//         gradient, then added into the f32 dw), else 0.
struct Conv2dGeometry {
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t padding = 1;
  int64_t out_size(int64_t in) const { return (in + 2 * padding - kernel) / stride + 1; }
};
int64_t conv2d_workspace_elems(const Shape& x, const Shape& w, const Conv2dGeometry& geometry,
                               DType dtype, Device device);
// y = conv(x, w), or y += conv(x, w) with accumulate (the sum over N-SDP
// channel groups of a block's second conv).
void conv2d_forward(const Tensor& x, const Tensor& w, const Conv2dGeometry& geometry, Tensor& y,
                    Tensor& workspace, bool accumulate = false);
// dx = conv_transpose(dy, w) (overwrite), or dx += with accumulate.
void conv2d_backward_input(const Tensor& dy, const Tensor& w, const Conv2dGeometry& geometry,
                           Tensor& dx, Tensor& workspace, bool accumulate = false);
// dw += correlation of x with dy.
void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Conv2dGeometry& geometry,
                            Tensor& dw, Tensor& workspace);

// ---- batch normalization over (B, H, W) per channel --------------------------
// x, y [B, C, H, W] (H = W = 1 allowed); weight, bias [C] (parameter dtype =
// x's); save_mean, save_invstd [C] and running_mean, running_var [C] in the
// accum dtype. Training: y = (x - mean) * invstd * weight + bias with the
// batch's biased variance, invstd = 1/sqrt(var + eps); running statistics
// move by `momentum` toward the batch mean and the *unbiased* batch variance
// (PyTorch's convention, n / (n - 1) with n = B H W; n = 1 keeps the biased
// 0), so a checkpoint means the same in PyTorch.
void batchnorm_forward_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             double eps, double momentum, Tensor& y, Tensor& save_mean,
                             Tensor& save_invstd, Tensor& running_mean, Tensor& running_var);
// The training normalization again (the same y, save_mean, save_invstd as
// batchnorm_forward_train on the same x), leaving the running statistics
// alone: the recomputation of a forward that has moved them already
// (activation checkpointing).
void batchnorm_forward_batch_stats(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   double eps, Tensor& y, Tensor& save_mean, Tensor& save_invstd);
// Evaluation: the running statistics instead of the batch's.
void batchnorm_forward_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, double eps,
                            Tensor& y);
// dx (overwritten) of the training forward; dx may alias dy.
void batchnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx);
// dweight += sum(dy * xhat), dbias += sum(dy) over (B, H, W).
void batchnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                               const Tensor& save_invstd, Tensor& dweight, Tensor& dbias);

// ---- ReLU, global average pooling, bias ---------------------------------------
// Any shape; y may alias x.
void relu_forward(const Tensor& x, Tensor& y);
// dx = dy where y > 0, else 0 (y: the forward's output); dx may alias dy.
void relu_backward_input(const Tensor& dy, const Tensor& y, Tensor& dx);
// x [B, C, H, W] -> y [B, C]: the mean over H, W (H, W >= 1).
void global_avg_pool_forward(const Tensor& x, Tensor& y);
// dy [B, C] -> dx [B, C, H, W] (overwritten): dy / (H W) everywhere.
void global_avg_pool_backward_input(const Tensor& dy, Tensor& dx);
// y [N, C] += bias [C] per row (after linear_forward: a linear layer with
// bias); bias in y's dtype. Like linear, y may be [..., C] (rows = the
// leading dims).
void bias_add_forward(Tensor& y, const Tensor& bias);
// dbias [C] (accum dtype) += column sums of dy [N, C] (or [..., C]).
void bias_backward_weight(const Tensor& dy, Tensor& dbias);

// ---- Swin Transformer ---------------------------------------------------------
// Token activations are channels-last: [B, H, W, C] (timm's layout), viewed
// as rows [N, C] by the row-wise ops (layernorm, linear, gelu).

// LayerNorm over the last dim: y = (x - mean) * rstd * weight + bias,
// rstd = 1 / sqrt(biased var + eps). x, y [..., D]; weight, bias [D] (x's
// dtype); mean, rstd [...] (the leading dims; accum dtype) saved for backward.
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                       Tensor& y, Tensor& mean, Tensor& rstd);
// dx (overwritten) of the forward; dx may alias dy.
void layernorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& mean, const Tensor& rstd, Tensor& dx);
// dweight += sum over rows of dy * xhat, dbias += sum of dy (accum dtype).
void layernorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& rstd, Tensor& dweight, Tensor& dbias);

// GELU, the exact (erf) form of torch.nn.GELU(): y = x / 2 (1 + erf(x / sqrt 2)).
// Any shape; y must not alias x in training (backward reads x).
void gelu_forward(const Tensor& x, Tensor& y);
// dx = dy * gelu'(x); dx may alias dy.
void gelu_backward_input(const Tensor& dy, const Tensor& x, Tensor& dx);

// Stochastic depth: y [B, ...] = x * factors[b] for every element of sample
// b (factors [B], accum dtype: 0 for a dropped sample, 1 / (1 - p) for a
// kept one). Forward and backward are the same op; y may alias x.
void scale_per_sample(const Tensor& x, const Tensor& factors, Tensor& y);

// Patch embedding's input: images [B, C, H, W] -> patches [B, H/p, W/p,
// C p p], the patch flattened as (channel, row, column) like a conv weight
// [D, C, p, p], so patch embedding is linear_forward with that weight viewed
// as [D, C p p] (+ bias). H and W must be multiples of p. The images need
// no gradient, so there is no backward.
void patchify(const Tensor& images, int64_t patch, Tensor& patches);

// Shifted windows as one index map (torch.roll by -shift on H and W, then
// the partition, without the intermediate copy):
//   windows [B nH nW, w w, C], nH = H / w, nW = W / w, window (b, i, j) at
//   row (b nH + i) nW + j, token (r, c) at r w + c:
//   windows[(b nH + i) nW + j, r w + c] = x[b, (i w + r + shift) mod H,
//                                            (j w + c + shift) mod W]
// x [B, H, W, C]; H, W multiples of w; 0 <= shift < w. Each op is the
// other's backward (a permutation), so the gradient of window_partition is
// window_merge of the gradient and vice versa.
void window_partition(const Tensor& x, int64_t window, int64_t shift, Tensor& windows);
// The inverse map (window reverse, then torch.roll by +shift): x overwritten.
void window_merge(const Tensor& windows, int64_t window, int64_t shift, Tensor& x);

// Swin's patch merging gather: x [B, H, W, C] -> y [B, H/2, W/2, 4C] with
// y[b, i, j] = concat(x[b, 2i, 2j], x[b, 2i+1, 2j], x[b, 2i, 2j+1],
// x[b, 2i+1, 2j+1]) (timm's order); H, W even.
void patch_merge_forward(const Tensor& x, Tensor& y);
// dx (overwritten) = the inverse scatter of dy.
void patch_merge_backward_input(const Tensor& dy, Tensor& dx);

// Mean over tokens: x [B, L, C] (or [B, H, W, C], L = H W) -> y [B, C].
void token_mean_forward(const Tensor& x, Tensor& y);
// dx (overwritten) = dy / L broadcast over the tokens.
void token_mean_backward_input(const Tensor& dy, Tensor& dx);

// Window self-attention with relative position bias and the shifted
// windows' mask, for every window and head at once.
//   qkv   [Bw, N, 3, H, Dh]: the qkv linear's output (q, k, v of H heads;
//         timm's qkv.weight row order), Bw windows of N = w w tokens
//   table [R, H] relative position bias table (qkv's dtype), index [N N] i32
//         with values in [0, R): bias[h, i, j] = table[index[i N + j], h]
//   mask  [nW, N, N] (qkv's dtype) added to window b's scores as mask[b mod
//         nW] (0 or a large negative value: timm uses -100), or a default
//         Tensor() (ndim 0: unshifted windows, no mask)
//   scores = scale q k^T + bias + mask; probs = softmax over the last axis
//   out   [Bw, N, H, Dh] = probs v (the layout the projection reads as
//         [Bw N, H Dh])
//   probs [Bw, H, N, N] saved for backward (N is small: 16 for the CIFAR
//         Swin-T's 4x4 windows, 49 for 7x7)
// Counts 4 Bw H N N Dh FLOPs (the two products).
void window_attention_forward(const Tensor& qkv, const Tensor& table, const Tensor& index,
                              const Tensor& mask, double scale, Tensor& out, Tensor& probs);
// dqkv [Bw, N, 3, H, Dh] overwritten. probs is consumed: it is overwritten
// with the score gradients (the forward's probabilities are not needed
// after this call), which is the scratch the table's gradient is reduced
// from. dtable, when not null: [R, H] in the accum dtype, += the bias
// table's gradient (the score gradients summed over windows in a fixed
// order, scattered by index). It is computed here, not in a later weight
// pass, because it needs the score gradients this call makes (as BatchNorm's
// weight gradients are). Counts 8 Bw H N N Dh FLOPs.
void window_attention_backward_input(const Tensor& dout, const Tensor& qkv, Tensor& probs,
                                     const Tensor& index, double scale, Tensor& dqkv,
                                     Tensor* dtable);

// ---- optimizer ---------------------------------------------------------------
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled: p -= lr * wd * p
  int64_t step = 1;           // 1-based, for bias correction
};
// param, grad, m, v: same shape and dtype (flat buffers are the usual case).
void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                  const AdamWConfig& config);

// Multi-tensor AdamW over one flat buffer cut into segments, each with its
// own weight decay (matrices decayed, norm gains not): one pass (one launch
// on CUDA) per call. param (the f32/f64 master values), grad, m, v: [n],
// same dtype. low_precision_copy, when given: [n] bf16 on the same device,
// overwritten with the updated values rounded to bf16 (the parameters the
// forward reads in mixed precision). config.weight_decay is ignored; each
// segment's is used. Segments must lie inside [0, n) and not overlap.
struct AdamWSegment {
  int64_t offset = 0;
  int64_t numel = 0;
  double weight_decay = 0;
};
void adamw_update_segments(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                           std::span<const AdamWSegment> segments, const AdamWConfig& config,
                           Tensor* low_precision_copy = nullptr);

// Global L2 norm over all tensors (computed in double). Returns 0 on meta.
double global_norm(std::span<const Tensor> tensors);
// Scales every tensor by min(1, max_norm / (norm + 1e-6)) when norm > max_norm;
// returns the norm before clipping.
double clip_grad_norm(std::span<Tensor> grads, double max_norm);

}  // namespace sdp::ops
