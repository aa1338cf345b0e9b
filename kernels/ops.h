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
