// BatchNorm: training forward against per-channel statistics computed here,
// the running statistics after two steps, the evaluation forward, both
// backward halves against finite differences (f64), f32 against f64, the
// meta device and the argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ops_test_util.h"

using namespace sdp;
using namespace sdp::testing;

namespace {

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

// Per-channel mean and biased variance of a [B, C, H, W] tensor.
struct ChannelStats {
  std::vector<double> mean, var;
};
ChannelStats channel_stats(const Tensor& t) {
  const auto v = to_vector(t);
  const int64_t B = t.size(0), C = t.size(1), S = t.size(2) * t.size(3);
  ChannelStats s{std::vector<double>(static_cast<size_t>(C), 0.0),
                 std::vector<double>(static_cast<size_t>(C), 0.0)};
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < S; ++i) sum += v[static_cast<size_t>((b * C + c) * S + i)];
    const double mean = sum / static_cast<double>(B * S);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < S; ++i) {
        const double dev = v[static_cast<size_t>((b * C + c) * S + i)] - mean;
        sq += dev * dev;
      }
    s.mean[static_cast<size_t>(c)] = mean;
    s.var[static_cast<size_t>(c)] = sq / static_cast<double>(B * S);
  }
  return s;
}

// The tensors of one BatchNorm layer, all in `dtype` (the CPU's accum dtype).
struct BatchNormSet {
  Tensor x, weight, bias, y, save_mean, save_invstd, running_mean, running_var;

  BatchNormSet(Arena& arena, Shape shape, DType dtype) {
    const Shape c{shape[1]};
    x = arena.make(shape, dtype);
    y = arena.make(shape, dtype);
    weight = arena.make(c, dtype);
    bias = arena.make(c, dtype);
    save_mean = arena.make(c, dtype);
    save_invstd = arena.make(c, dtype);
    running_mean = arena.make(c, dtype);
    running_var = arena.make(c, dtype);
    fill_uniform(x, 1, 1.0, 4.0);  // mean far from 0: the statistics must not cancel
    fill_uniform(weight, 2, 0.5, 1.5);
    fill_uniform(bias, 3);
    ops::fill(running_mean, 0.0);
    ops::fill(running_var, 1.0);
  }
  void forward_train() {
    ops::batchnorm_forward_train(x, weight, bias, kEps, kMomentum, y, save_mean, save_invstd,
                                 running_mean, running_var);
  }
};

}  // namespace

TEST_CASE("batchnorm_forward_train normalizes each channel to (beta, gamma^2)",
          "[ops][batchnorm]") {
  for (const auto& dc : kFloatCases) {
    for (Shape shape : {Shape{3, 4, 5, 3}, Shape{8, 3, 1, 1}, Shape{2, 5, 6, 7}}) {
      INFO(dtype_name(dc.dtype) << " " << shape.str());
      Arena arena;
      BatchNormSet bn(arena, shape, dc.dtype);
      fill_garbage(bn.y);
      bn.forward_train();
      const ChannelStats in = channel_stats(bn.x), out = channel_stats(bn.y);
      const auto gamma = to_vector(bn.weight), beta = to_vector(bn.bias);
      std::vector<double> want_var, want_invstd;
      for (size_t c = 0; c < gamma.size(); ++c) {
        want_var.push_back(gamma[c] * gamma[c] * in.var[c] / (in.var[c] + kEps));
        want_invstd.push_back(1.0 / std::sqrt(in.var[c] + kEps));
      }
      REQUIRE(max_rel_error(out.mean, beta, 1.0) < 10 * dc.tol);
      REQUIRE(max_rel_error(out.var, want_var) < 10 * dc.tol);
      REQUIRE(max_rel_error(to_vector(bn.save_mean), in.mean) < dc.tol);
      REQUIRE(max_rel_error(to_vector(bn.save_invstd), want_invstd) < dc.tol);
    }
  }
}

TEST_CASE("batchnorm running statistics follow PyTorch's update (unbiased variance)",
          "[ops][batchnorm]") {
  for (Shape shape : {Shape{3, 4, 5, 3}, Shape{1, 3, 1, 1}}) {
    INFO(shape.str());
    Arena arena;
    BatchNormSet bn(arena, shape, DType::f64);
    fill_uniform(bn.running_mean, 4);
    fill_uniform(bn.running_var, 5, 0.5, 2.0);
    auto rm = to_vector(bn.running_mean), rv = to_vector(bn.running_var);
    const double n = static_cast<double>(shape[0] * shape[2] * shape[3]);
    for (uint64_t step = 0; step < 2; ++step) {
      fill_uniform(bn.x, 10 + step, -2.0, 3.0);
      const ChannelStats s = channel_stats(bn.x);
      for (size_t c = 0; c < rm.size(); ++c) {
        const double unbiased = n > 1 ? s.var[c] * n / (n - 1) : s.var[c];
        rm[c] = (1 - kMomentum) * rm[c] + kMomentum * s.mean[c];
        rv[c] = (1 - kMomentum) * rv[c] + kMomentum * unbiased;
      }
      bn.forward_train();
    }
    REQUIRE(max_rel_error(to_vector(bn.running_mean), rm) < 1e-12);
    REQUIRE(max_rel_error(to_vector(bn.running_var), rv) < 1e-12);
  }
}

TEST_CASE("batchnorm_forward_eval uses the running statistics", "[ops][batchnorm]") {
  for (const auto& dc : kFloatCases) {
    Arena arena;
    const Shape shape{2, 3, 4, 5};
    BatchNormSet bn(arena, shape, dc.dtype);
    fill_uniform(bn.running_mean, 6);
    fill_uniform(bn.running_var, 7, 0.5, 2.0);
    fill_garbage(bn.y);
    ops::batchnorm_forward_eval(bn.x, bn.weight, bn.bias, bn.running_mean, bn.running_var,
                                kEps, bn.y);
    const auto x = to_vector(bn.x), g = to_vector(bn.weight), b = to_vector(bn.bias);
    const auto rm = to_vector(bn.running_mean), rv = to_vector(bn.running_var);
    std::vector<double> want(x.size());
    const int64_t S = 20;
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t c = (i / S) % 3;
      want[i] = (x[i] - rm[c]) / std::sqrt(rv[c] + kEps) * g[c] + b[c];
    }
    REQUIRE(max_rel_error(to_vector(bn.y), want) < dc.tol);
  }
}

TEST_CASE("batchnorm backward matches finite differences", "[ops][batchnorm]") {
  for (Shape shape : {Shape{3, 4, 3, 2}, Shape{5, 3, 1, 1}}) {
    INFO(shape.str());
    Arena arena;
    BatchNormSet bn(arena, shape, DType::f64);
    Tensor r = arena.make(shape);  // d loss / d y
    fill_uniform(r, 8);
    auto loss = [&] {
      bn.forward_train();
      return weighted_sum(bn.y, r);
    };
    const auto num_dx = numeric_gradient(bn.x, loss);
    const auto num_dweight = numeric_gradient(bn.weight, loss);
    const auto num_dbias = numeric_gradient(bn.bias, loss);
    loss();  // the saved statistics of the unperturbed x

    Tensor dx = arena.make(shape);
    fill_garbage(dx);
    ops::batchnorm_backward_input(r, bn.x, bn.weight, bn.save_mean, bn.save_invstd, dx);
    REQUIRE(max_rel_error(to_vector(dx), num_dx) < 1e-6);

    // dx may alias dy
    Tensor inplace = arena.make(shape);
    ops::copy(r, inplace);
    ops::batchnorm_backward_input(inplace, bn.x, bn.weight, bn.save_mean, bn.save_invstd,
                                  inplace);
    REQUIRE(max_rel_error(to_vector(inplace), to_vector(dx)) < 1e-15);

    Tensor dweight = arena.make({shape[1]}), dbias = arena.make({shape[1]});
    ops::fill(dweight, 0.0);
    ops::fill(dbias, 0.0);
    ops::batchnorm_backward_weight(r, bn.x, bn.save_mean, bn.save_invstd, dweight, dbias);
    REQUIRE(max_rel_error(to_vector(dweight), num_dweight) < 1e-7);
    REQUIRE(max_rel_error(to_vector(dbias), num_dbias) < 1e-7);
    ops::batchnorm_backward_weight(r, bn.x, bn.save_mean, bn.save_invstd, dweight, dbias);
    auto twice = num_dbias;
    for (double& v : twice) v *= 2;
    REQUIRE(max_rel_error(to_vector(dbias), twice) < 1e-7);
  }
}

TEST_CASE("batchnorm in f32 agrees with f64, on one thread and on several",
          "[ops][batchnorm]") {
  const Shape shape{4, 6, 16, 16};  // past the threshold where threads split channels
  for (int threads : {1, 2}) {
    ThreadCount guard(threads);
    std::vector<std::vector<double>> results[2];
    for (int k = 0; k < 2; ++k) {
      const DType dtype = k == 0 ? DType::f64 : DType::f32;
      Arena arena;
      BatchNormSet bn(arena, shape, dtype);
      Tensor r = arena.make(shape, dtype), dx = arena.make(shape, dtype);
      Tensor dweight = arena.make({shape[1]}, dtype), dbias = arena.make({shape[1]}, dtype);
      fill_uniform(r, 9);
      bn.forward_train();
      ops::batchnorm_backward_input(r, bn.x, bn.weight, bn.save_mean, bn.save_invstd, dx);
      ops::fill(dweight, 0.0);
      ops::fill(dbias, 0.0);
      ops::batchnorm_backward_weight(r, bn.x, bn.save_mean, bn.save_invstd, dweight, dbias);
      results[k] = {to_vector(bn.y), to_vector(dx), to_vector(dweight), to_vector(dbias),
                    to_vector(bn.running_var)};
    }
    for (size_t i = 0; i < results[0].size(); ++i) {
      INFO("output " << i << ", " << threads << " threads");
      REQUIRE(max_rel_error(results[1][i], results[0][i]) < 1e-5);
    }
  }
}

TEST_CASE("batchnorm on meta: bf16 activations with f32 statistics, nothing computed",
          "[ops][batchnorm]") {
  MetaAllocator meta(512, Device::cuda);
  auto make = [&](Shape s, DType dtype) {
    return OwnedTensor(meta, s, dtype, MemCategory::activation);
  };
  const Shape shape{8, 16, 4, 4}, c{16};
  OwnedTensor x = make(shape, DType::bf16), y = make(shape, DType::bf16);
  OwnedTensor w = make(c, DType::bf16), b = make(c, DType::bf16);
  OwnedTensor mean = make(c, DType::f32), invstd = make(c, DType::f32);
  OwnedTensor rm = make(c, DType::f32), rv = make(c, DType::f32);
  OwnedTensor dw = make(c, DType::f32), db = make(c, DType::f32);
  ops::batchnorm_forward_train(*x, *w, *b, kEps, kMomentum, *y, *mean, *invstd, *rm, *rv);
  ops::batchnorm_forward_eval(*x, *w, *b, *rm, *rv, kEps, *y);
  ops::batchnorm_backward_input(*y, *x, *w, *mean, *invstd, *y);
  ops::batchnorm_backward_weight(*y, *x, *mean, *invstd, *dw, *db);

  OwnedTensor rm64 = make(c, DType::f64), db16 = make(c, DType::bf16);
  OwnedTensor w32 = make(c, DType::f32), bad_y = make({8, 16, 4, 5}, DType::bf16);
  REQUIRE_THROWS_WITH(
      ops::batchnorm_forward_train(*x, *w, *b, kEps, kMomentum, *y, *mean, *invstd, *rm64, *rv),
      Catch::Contains("batchnorm_forward_train") && Catch::Contains("running_mean has dtype f64") &&
          Catch::Contains("expected f32"));
  REQUIRE_THROWS_WITH(ops::batchnorm_backward_weight(*y, *x, *mean, *invstd, *dw, *db16),
                      Catch::Contains("batchnorm_backward_weight") &&
                          Catch::Contains("dbias has dtype bf16"));
  REQUIRE_THROWS_WITH(ops::batchnorm_forward_eval(*x, *w32, *b, *rm, *rv, kEps, *y),
                      Catch::Contains("batchnorm_forward_eval") &&
                          Catch::Contains("weight has dtype f32") &&
                          Catch::Contains("expected bf16"));
  REQUIRE_THROWS_WITH(ops::batchnorm_backward_input(*bad_y, *x, *w, *mean, *invstd, *y),
                      Catch::Contains("batchnorm_backward_input") &&
                          Catch::Contains("dy has shape"));
}

TEST_CASE("batchnorm rejects bad arguments, naming them", "[ops][batchnorm]") {
  Arena arena;
  const Shape shape{2, 3, 4, 4};
  BatchNormSet bn(arena, shape, DType::f64);
  Tensor bad_c = arena.make({4}), f32_c = arena.make({3}, DType::f32);
  Tensor flat = arena.make({2, 3}), dx = arena.make(shape);
  auto train = [&](const Tensor& x, const Tensor& w, Tensor& mean, Tensor& rv, double momentum) {
    ops::batchnorm_forward_train(x, w, bn.bias, kEps, momentum, bn.y, mean, bn.save_invstd,
                                 bn.running_mean, rv);
  };
  REQUIRE_THROWS_WITH(train(bn.x, bad_c, bn.save_mean, bn.running_var, kMomentum),
                      Catch::Contains("batchnorm_forward_train") &&
                          Catch::Contains("weight has shape [4]"));
  REQUIRE_THROWS_WITH(train(bn.x, bn.weight, f32_c, bn.running_var, kMomentum),
                      Catch::Contains("save_mean has dtype f32") &&
                          Catch::Contains("expected f64"));
  REQUIRE_THROWS_WITH(train(bn.x, bn.weight, bn.save_mean, bad_c, kMomentum),
                      Catch::Contains("running_var has shape"));
  REQUIRE_THROWS_WITH(train(flat, bn.weight, bn.save_mean, bn.running_var, kMomentum),
                      Catch::Contains("x must be [B, C, H, W]"));
  REQUIRE_THROWS_WITH(train(bn.x, bn.weight, bn.save_mean, bn.running_var, 1.5),
                      Catch::Contains("momentum"));
  REQUIRE_THROWS_WITH(ops::batchnorm_forward_eval(bn.x, bn.weight, bn.bias, bn.running_mean,
                                                  bn.running_var, -1.0, bn.y),
                      Catch::Contains("batchnorm_forward_eval") && Catch::Contains("eps"));
  REQUIRE_THROWS_WITH(
      ops::batchnorm_backward_input(bn.y, bn.x, bn.weight, bn.save_mean, f32_c, dx),
      Catch::Contains("batchnorm_backward_input") && Catch::Contains("save_invstd has dtype"));
  REQUIRE_THROWS_WITH(
      ops::batchnorm_backward_weight(bn.y, bn.x, bn.save_mean, bn.save_invstd, bad_c, bn.bias),
      Catch::Contains("batchnorm_backward_weight") && Catch::Contains("dweight has shape"));
}

TEST_CASE("batchnorm_forward_batch_stats repeats the training forward, running statistics untouched",
          "[ops][batchnorm]") {
  Arena arena;
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    BatchNormSet train(arena, {3, 4, 5, 5}, dt);
    train.forward_train();
    BatchNormSet again(arena, {3, 4, 5, 5}, dt);
    fill_uniform(again.running_mean, 8);  // any values: neither read nor written
    const auto mean_before = to_vector(again.running_mean);
    const auto var_before = to_vector(again.running_var);
    ops::batchnorm_forward_batch_stats(again.x, again.weight, again.bias, kEps, again.y,
                                       again.save_mean, again.save_invstd);
    // Bit for bit the training forward's output and batch statistics.
    REQUIRE(to_vector(again.y) == to_vector(train.y));
    REQUIRE(to_vector(again.save_mean) == to_vector(train.save_mean));
    REQUIRE(to_vector(again.save_invstd) == to_vector(train.save_invstd));
    REQUIRE(to_vector(again.running_mean) == mean_before);
    REQUIRE(to_vector(again.running_var) == var_before);
    // ... where the training forward moved them.
    REQUIRE(to_vector(train.running_mean) != std::vector<double>(4, 0.0));
  }
  BatchNormSet s(arena, {2, 3, 2, 2}, DType::f64);
  Tensor short_mean = arena.make({2}, DType::f64);
  REQUIRE_THROWS_WITH(ops::batchnorm_forward_batch_stats(s.x, s.weight, s.bias, kEps, s.y,
                                                         short_mean, s.save_invstd),
                      Catch::Contains("batchnorm_forward_batch_stats") &&
                          Catch::Contains("save_mean"));
}
