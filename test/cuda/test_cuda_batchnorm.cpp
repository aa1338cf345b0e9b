// Batch normalization on CUDA against the CPU: the training forward (y, the
// saved mean and invstd, the running statistics moved by momentum), the
// evaluation forward, the input gradient (also in place over dy) and the
// weight and bias gradients accumulated into f32 tensors that already hold
// values. Statistics and weight gradients are f32 (accum_dtype) computed
// from exact inputs, so they are held to the f32 column in bf16 runs too.
#include <catch2/catch.hpp>
#include <string>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

TEST_CASE("batchnorm forward (train, eval) and backward on CUDA match the CPU",
          "[ops][batchnorm]") {
  // [B, C, H, W]: packed loads (H W a multiple of 8), odd H W (element
  // loads), H = W = 1, one element per channel (the running variance takes
  // the biased one), channels of more elements than a block has threads,
  // and a CIFAR stage-1 activation at batch 32.
  const Shape shapes[] = {{4, 16, 8, 8}, {3, 5, 7, 7},     {6, 8, 1, 1},
                          {1, 4, 1, 1},  {64, 12, 16, 16}, {32, 64, 32, 32}};
  const double eps = 1e-5, momentum = 0.1;
  for (DType dt : kGpuDtypes)
    for (const Shape& shape : shapes) {
      CAPTURE(name_of(dt), shape.str());
      const std::string label = " x " + shape.str();
      TwinArena a;
      const DType acc = accum_dtype(dt);
      const int64_t c = shape[1];
      // A mean far from 0 next to a small spread: a variance computed as
      // E[x^2] - mean^2 in f32 would lose most of its digits here.
      Twin x = a.uniform(shape, dt, 1, 3, 5);
      Twin weight = a.uniform({c}, dt, 2, 0.5, 1.5);
      Twin bias = a.uniform({c}, dt, 3, -0.5, 0.5);
      Twin running_mean = a.uniform({c}, acc, 4, -1, 1);
      Twin running_var = a.uniform({c}, acc, 5, 0.5, 1.5);
      Twin y = a.output(shape, dt);
      Twin save_mean = a.output({c}, acc), save_invstd = a.output({c}, acc);
      ops::batchnorm_forward_train(x.dev, weight.dev, bias.dev, eps, momentum, y.dev, save_mean.dev,
                                   save_invstd.dev, running_mean.dev, running_var.dev);
      ops::batchnorm_forward_train(x.host, weight.host, bias.host, eps, momentum, y.host,
                                   save_mean.host, save_invstd.host, running_mean.host,
                                   running_var.host);
      a.expect_close("batchnorm_forward_train y" + label, y.dev, y.host, kReduction);
      a.expect_close("batchnorm_forward_train save_mean" + label, save_mean.dev, save_mean.host,
                     kReduction);
      a.expect_close("batchnorm_forward_train save_invstd" + label, save_invstd.dev,
                     save_invstd.host, kReduction);
      a.expect_close("batchnorm_forward_train running_mean" + label, running_mean.dev,
                     running_mean.host, kReduction);
      a.expect_close("batchnorm_forward_train running_var" + label, running_var.dev,
                     running_var.host, kReduction);

      // The recomputation's forward: the same output and batch statistics,
      // the running statistics left as the training forward set them.
      Twin y_again = a.output(shape, dt);
      Twin mean_again = a.output({c}, acc), invstd_again = a.output({c}, acc);
      ops::batchnorm_forward_batch_stats(x.dev, weight.dev, bias.dev, eps, y_again.dev,
                                         mean_again.dev, invstd_again.dev);
      // Same kernel, same input: bit for bit the training forward's.
      expect_close("batchnorm_forward_batch_stats y" + label, a.download(y_again.dev),
                   a.download(y.dev), 0.0);
      expect_close("batchnorm_forward_batch_stats save_mean" + label, a.download(mean_again.dev),
                   a.download(save_mean.dev), 0.0);
      expect_close("batchnorm_forward_batch_stats save_invstd" + label,
                   a.download(invstd_again.dev), a.download(save_invstd.dev), 0.0);
      a.expect_close("batchnorm_forward_batch_stats running_mean untouched" + label,
                     running_mean.dev, running_mean.host, kReduction);

      // Evaluation from the reference's running statistics (exact in f32).
      Twin eval_mean = a.values({c}, acc, host_values(running_mean.host));
      Twin eval_var = a.values({c}, acc, host_values(running_var.host));
      Twin y_eval = a.output(shape, dt);
      ops::batchnorm_forward_eval(x.dev, weight.dev, bias.dev, eval_mean.dev, eval_var.dev, eps,
                                  y_eval.dev);
      ops::batchnorm_forward_eval(x.host, weight.host, bias.host, eval_mean.host, eval_var.host,
                                  eps, y_eval.host);
      a.expect_close("batchnorm_forward_eval y" + label, y_eval.dev, y_eval.host, kElementwise);

      // Backward from the reference's saved statistics, rounded to f32 on both sides.
      Twin mean = a.values({c}, acc, host_values(save_mean.host));
      Twin invstd = a.values({c}, acc, host_values(save_invstd.host));
      Twin dy = a.uniform(shape, dt, 6, -1, 1);
      Twin dx = a.output(shape, dt);
      ops::batchnorm_backward_input(dy.dev, x.dev, weight.dev, mean.dev, invstd.dev, dx.dev);
      ops::batchnorm_backward_input(dy.host, x.host, weight.host, mean.host, invstd.host, dx.host);
      a.expect_close("batchnorm_backward_input dx" + label, dx.dev, dx.host, kReduction);

      // dx over dy itself: the same values.
      Twin in_place = a.values(shape, dt, host_values(dy.host));
      ops::batchnorm_backward_input(in_place.dev, x.dev, weight.dev, mean.dev, invstd.dev,
                                    in_place.dev);
      a.expect_close("batchnorm_backward_input dx in place of dy" + label, in_place.dev, dx.host,
                     kReduction);

      Twin dweight = a.uniform({c}, acc, 7, -1, 1);  // accumulated into
      Twin dbias = a.uniform({c}, acc, 8, -1, 1);
      ops::batchnorm_backward_weight(dy.dev, x.dev, mean.dev, invstd.dev, dweight.dev, dbias.dev);
      ops::batchnorm_backward_weight(dy.host, x.host, mean.host, invstd.host, dweight.host,
                                     dbias.host);
      a.expect_close("batchnorm_backward_weight dweight" + label, dweight.dev, dweight.host,
                     kReduction);
      a.expect_close("batchnorm_backward_weight dbias" + label, dbias.dev, dbias.host, kReduction);
    }
}
