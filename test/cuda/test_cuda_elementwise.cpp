// The utility ops on CUDA against their CPU twins: fill, copy (strided views
// too), add, accumulate, scale, the reductions, item, transfer, convert, and
// every op on empty tensors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "test/cuda/cuda_test_support.h"

using namespace sdp;
using namespace sdp::cuda_testing;

namespace {

// Sizes below one block, and above several blocks while not a multiple of
// any vector width.
constexpr int64_t kSizes[] = {3, 100003};

std::string sized(const char* op, int64_t n) { return std::string(op) + " n=" + std::to_string(n); }

// Raw bit patterns of a host tensor of 2- or 4-byte elements.
std::vector<uint32_t> bits_of(const Tensor& host) {
  std::vector<uint32_t> out(static_cast<size_t>(host.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (dtype_size(host.dtype()) == 2) {
      uint16_t b;
      std::memcpy(&b, static_cast<const char*>(host.raw()) + 2 * i, 2);
      out[i] = b;
    } else {
      std::memcpy(&out[i], static_cast<const char*>(host.raw()) + 4 * i, 4);
    }
  }
  return out;
}

bool is_nan_bits(uint32_t bits, DType dtype) {
  if (dtype == DType::bf16) return (bits & 0x7fffu) > 0x7f80u;
  return (bits & 0x7fffffffu) > 0x7f800000u;
}

// Bit-for-bit equality of two host tensors, any NaN matching any NaN (the
// payload of a NaN is not part of the contract). Reports the first mismatch.
void expect_same_bits(const std::string& label, const Tensor& got, const Tensor& want) {
  REQUIRE(got.dtype() == want.dtype());
  const auto g = bits_of(got), w = bits_of(want);
  REQUIRE(g.size() == w.size());
  int64_t mismatches = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same = g[i] == w[i] || (is_nan_bits(g[i], got.dtype()) &&
                                       is_nan_bits(w[i], want.dtype()));
    if (!same && mismatches++ == 0) first = static_cast<int64_t>(i);
  }
  std::printf("  %s %s: %lld of %zu elements differ\n", mismatches ? "FAIL" : "ok  ",
              label.c_str(), static_cast<long long>(mismatches), g.size());
  INFO(label << ": " << mismatches << " of " << g.size() << " elements differ; first at "
             << first << ": cuda bits 0x" << std::hex << (first >= 0 ? g[first] : 0)
             << ", cpu bits 0x" << (first >= 0 ? w[first] : 0));
  CHECK(mismatches == 0);
}

// A host tensor of the given f32 bit patterns.
Tensor f32_from_bits(TwinArena& arena, const std::vector<uint32_t>& bits) {
  Tensor t = arena.host({static_cast<int64_t>(bits.size())}, DType::f32);
  std::memcpy(t.raw(), bits.data(), 4 * bits.size());
  return t;
}

}  // namespace

TEST_CASE("fill, copy, add, accumulate and scale on CUDA match the CPU", "[ops][utility]") {
  for (DType dt : kGpuDtypes)
    for (int64_t n : kSizes) {
      CAPTURE(name_of(dt), n);
      TwinArena a;
      Twin filled = a.output({n}, dt);
      const double value = -1.0 / 3.0;
      ops::fill(filled.dev, value);
      ops::fill(filled.host, round_to(dt, value));
      a.expect_close(sized("fill", n), filled.dev, filled.host, kExact);

      Twin src = a.uniform({n}, dt, 1, -2, 2), dst = a.output({n}, dt);
      ops::copy(src.dev, dst.dev);
      ops::copy(src.host, dst.host);
      a.expect_close(sized("copy", n), dst.dev, dst.host, kExact);

      Twin x = a.uniform({n}, dt, 2, -2, 2), y = a.uniform({n}, dt, 3, -1, 1);
      Twin sum = a.output({n}, dt);
      ops::add(x.dev, y.dev, sum.dev);
      ops::add(x.host, y.host, sum.host);
      a.expect_close(sized("add", n), sum.dev, sum.host, kElementwise);
      ops::add(x.dev, y.dev, x.dev);  // out aliasing a
      ops::add(x.host, y.host, x.host);
      a.expect_close(sized("add into a", n), x.dev, x.host, kElementwise);

      Twin acc = a.uniform({n}, dt, 4, -1, 1);
      ops::accumulate(acc.dev, y.dev);
      ops::accumulate(acc.host, y.host);
      a.expect_close(sized("accumulate", n), acc.dev, acc.host, kElementwise);

      ops::scale(acc.dev, 0.37);
      ops::scale(acc.host, 0.37);
      a.expect_close(sized("scale", n), acc.dev, acc.host, kElementwise);
    }

  TwinArena a;
  Tensor ints = a.device({1001}, DType::i32);
  ops::fill(ints, 7);
  const auto got = a.download(ints);
  CHECK(std::count(got.begin(), got.end(), 7.0) == 1001);
  Twin tokens = a.integers({1001}, 5, -5, 1000);
  Tensor copied = a.device({1001}, DType::i32);
  ops::copy(tokens.dev, copied);
  CHECK(a.download(copied) == host_values(tokens.host));
}

TEST_CASE("copy into and out of strided views on CUDA", "[ops][utility]") {
  for (DType dt : kGpuDtypes) {
    CAPTURE(name_of(dt));
    TwinArena a;
    // out of a view: columns [3, 8) of a [7, 16] matrix
    Twin wide = a.uniform({7, 16}, dt, 10, -2, 2);
    Twin narrow = a.output({7, 5}, dt);
    ops::copy(wide.dev.narrow(1, 3, 5), narrow.dev);
    ops::copy(wide.host.narrow(1, 3, 5), narrow.host);
    a.expect_close("copy from a [7, 16] narrowed to columns 3..7", narrow.dev, narrow.host,
                   kExact);

    // into a view of a 3-D tensor: the rest of the parent stays as it was
    Twin parent = a.uniform({5, 8, 6}, dt, 11, -2, 2);
    Twin piece = a.uniform({5, 3, 6}, dt, 12, -2, 2);
    Tensor dev_view = parent.dev.narrow(1, 4, 3), host_view = parent.host.narrow(1, 4, 3);
    ops::copy(piece.dev, dev_view);
    ops::copy(piece.host, host_view);
    a.expect_close("copy into [5, 8, 6] narrowed to dim-1 rows 4..6", parent.dev, parent.host,
                   kExact);

    // view to view, both strided along the last dim
    Twin other = a.uniform({5, 8, 6}, dt, 13, -2, 2);
    Tensor dev_src = other.dev.narrow(2, 1, 4), host_src = other.host.narrow(2, 1, 4);
    Tensor dev_dst = parent.dev.narrow(2, 2, 4), host_dst = parent.host.narrow(2, 2, 4);
    ops::copy(dev_src, dev_dst);
    ops::copy(host_src, host_dst);
    a.expect_close("copy from one last-dim view into another", parent.dev, parent.host, kExact);
  }
}

TEST_CASE("sum_squares, sum, count_nonnegative and item on CUDA match the CPU",
          "[ops][utility]") {
  const double tol = threshold_for(kReduction, DType::f32);  // the results are doubles
  for (DType dt : kGpuDtypes)
    for (int64_t n : {int64_t{5}, int64_t{1000}, (int64_t{1} << 20) + 37}) {
      CAPTURE(name_of(dt), n);
      TwinArena a;
      // a positive mean keeps the sum away from zero, as a relative error needs
      Twin x = a.uniform({n}, dt, 20 + static_cast<uint64_t>(n), -0.5, 1.0);
      expect_close(sized("sum_squares", n) + " [" + name_of(dt) + "]",
                   {ops::sum_squares(x.dev)}, {ops::sum_squares(x.host)}, tol);
      expect_close(sized("sum", n) + " [" + name_of(dt) + "]", {ops::sum(x.dev)},
                   {ops::sum(x.host)}, tol);
    }

  for (int64_t n : {int64_t{7}, int64_t{100003}, (int64_t{1} << 20) + 1}) {
    TwinArena a;
    Twin t = a.integers({n}, 30, -3, 5);
    CHECK(ops::count_nonnegative(t.dev) == ops::count_nonnegative(t.host));
  }

  for (DType dt : kGpuDtypes) {
    CAPTURE(name_of(dt));
    TwinArena a;
    Twin x = a.uniform({4, 7}, dt, 40, -3, 3);
    for (int64_t i : {0, 13, 27}) CHECK(ops::item(x.dev, i) == ops::item(x.host, i));
    // row-major order of a strided view: element 4 of [4, 3] is (1, 1), in
    // the parent (1, 3), its element 10
    CHECK(ops::item(x.dev.narrow(1, 2, 3), 4) == ops::item(x.host.narrow(1, 2, 3), 4));
    CHECK(ops::item(x.dev.narrow(1, 2, 3), 4) == ops::item(x.host, 10));
  }
  TwinArena a;
  Twin ints = a.integers({9}, 41, -100, 100);
  for (int64_t i = 0; i < 9; ++i) CHECK(ops::item(ints.dev, i) == ops::item(ints.host, i));
}

TEST_CASE("transfer round trips between host and GPU bit for bit", "[ops][utility]") {
  TwinArena a;
  std::mt19937 rng(50);
  std::vector<uint32_t> bits(4099);
  for (uint32_t& b : bits) b = rng();
  // the values whose bits a careless path (a float conversion) would change
  const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                               0x7fc00001u, 0xffbfffffu, 0x00000001u, 0x807fffffu};
  std::copy(std::begin(specials), std::end(specials), bits.begin());
  const int64_t n = static_cast<int64_t>(bits.size());

  for (DType dt : {DType::f32, DType::bf16, DType::i32}) {
    CAPTURE(name_of(dt));
    Tensor original = a.host({n}, dt);
    for (int64_t i = 0; i < n; ++i) {
      const auto i_ = static_cast<size_t>(i);
      if (dt == DType::bf16)
        std::memcpy(static_cast<char*>(original.raw()) + 2 * i, &bits[i_], 2);
      else
        std::memcpy(static_cast<char*>(original.raw()) + 4 * i, &bits[i_], 4);
    }
    Tensor on_gpu = a.device({n}, dt), on_gpu_again = a.device({n}, dt);
    Tensor back = a.host({n}, dt);
    ops::transfer(original, on_gpu);
    ops::transfer(on_gpu, on_gpu_again);  // device to device
    ops::transfer(on_gpu_again, back);
    CHECK(std::memcmp(original.raw(), back.raw(), original.bytes()) == 0);
  }
}

TEST_CASE("convert between f32 and bf16 on CUDA rounds as the CPU does", "[ops][utility]") {
  TwinArena a;
  // Normal f32 values of every exponent from random bit patterns, and the
  // cases rounding to nearest even must get right.
  std::mt19937 rng(60);
  std::vector<uint32_t> normal_bits = {
      0x3f800000u,  // 1
      0x3f808000u,  // 1 + 2^-8: a tie, stays at the even 1
      0x3f818000u,  // 1 + 3 * 2^-8: a tie, rounds up to the even 1 + 2^-6
      0x3f808001u,  // just above the tie: rounds up
      0x3f807fffu,  // just below: rounds down
      0x7f7fffffu,  // f32 max: rounds to infinity
      0x7f7f7fffu,  // just below the tie with infinity: the largest bf16
      0x7f800000u, 0xff800000u,  // +-inf
      0x7fc00000u, 0xff812345u,  // NaNs (the second would round to inf if treated as a number)
      0x00000000u, 0x80000000u,  // +-0
      0x00800000u,  // the smallest normal f32
  };
  while (normal_bits.size() < 65536) {
    const uint32_t b = rng();
    if ((b & 0x7f800000u) != 0) normal_bits.push_back(b);
  }
  // Subnormal f32 values: a kernel compiled to flush them to zero fails here.
  std::vector<uint32_t> subnormal_bits;
  for (int i = 0; i < 4096; ++i) subnormal_bits.push_back(rng() & 0x807fffffu);

  for (const auto& [label, bits] :
       {std::pair{"f32 -> bf16 (normal values, ties, overflow, inf, NaN)", normal_bits},
        std::pair{"f32 -> bf16 (subnormal values)", subnormal_bits}}) {
    const int64_t n = static_cast<int64_t>(bits.size());
    Tensor host_f32 = f32_from_bits(a, bits);
    Tensor host_bf16 = a.host({n}, DType::bf16);
    ops::convert(host_f32, host_bf16);  // the CPU twin

    Tensor dev_f32 = a.device({n}, DType::f32), dev_bf16 = a.device({n}, DType::bf16);
    ops::transfer(host_f32, dev_f32);
    ops::convert(dev_f32, dev_bf16);
    Tensor got = a.host({n}, DType::bf16);
    ops::transfer(dev_bf16, got);
    expect_same_bits(std::string("convert ") + label, got, host_bf16);
  }

  // bf16 -> f32 is exact: every one of the 65536 bf16 values.
  Tensor all_bf16 = a.host({65536}, DType::bf16);
  for (uint32_t b = 0; b < 65536; ++b) all_bf16.data<bf16>()[b].bits = static_cast<uint16_t>(b);
  Tensor want = a.host({65536}, DType::f32);
  ops::convert(all_bf16, want);
  Tensor dev_bf16 = a.device({65536}, DType::bf16), dev_f32 = a.device({65536}, DType::f32);
  ops::transfer(all_bf16, dev_bf16);
  ops::convert(dev_bf16, dev_f32);
  Tensor got = a.host({65536}, DType::f32);
  ops::transfer(dev_f32, got);
  expect_same_bits("convert bf16 -> f32 (every bf16 value)", got, want);

  Tensor dev_f64 = a.device({4}, DType::f64), small_f32 = a.device({4}, DType::f32);
  CHECK_THROWS_WITH(ops::convert(dev_f64, small_f32), Catch::Contains("f64"));
}

TEST_CASE("ops on empty CUDA tensors launch nothing and fail nothing", "[ops][utility]") {
  for (DType dt : kGpuDtypes) {
    CAPTURE(name_of(dt));
    TwinArena a;
    const DType acc = accum_dtype(dt);
    Tensor x = a.device({0}, dt), y = a.device({0}, dt), z = a.device({0}, dt);
    ops::fill(x, 1.0);
    ops::copy(x, y);
    ops::add(x, y, z);
    ops::accumulate(z, x);
    ops::scale(z, 2.0);
    CHECK(ops::sum_squares(x) == 0.0);
    CHECK(ops::sum(x) == 0.0);
    Tensor host = a.host({0}, dt);
    ops::transfer(x, host);
    ops::transfer(host, x);
    Tensor other = a.device({0}, dt == DType::f32 ? DType::bf16 : DType::f32);
    ops::convert(x, other);

    Tensor no_targets = a.device({0}, DType::i32);
    CHECK(ops::count_nonnegative(no_targets) == 0);

    Tensor rows = a.device({0, 64}, dt), rows_out = a.device({0, 64}, dt);
    Tensor weight = a.device({64}, dt), rstd = a.device({0}, acc);
    ops::fill(weight, 1.0);
    ops::rmsnorm_forward(rows, weight, 1e-5, rows_out, rstd);

    Tensor w = a.device({16, 64}, dt), lin_out = a.device({0, 16}, dt);
    ops::fill(w, 0.5);
    ops::linear_forward(rows, w, lin_out);
    Tensor dw = a.device({16, 64}, acc);
    ops::fill(dw, 0.25);
    ops::linear_backward_weight(lin_out, rows, dw);  // adds nothing
    const auto dw_values = a.download(dw);
    CHECK(std::count(dw_values.begin(), dw_values.end(), 0.25) == 16 * 64);

    Tensor gate = a.device({0, 8}, dt), up = a.device({0, 8}, dt), act = a.device({0, 8}, dt);
    ops::swiglu_forward(gate, up, act);

    Tensor table = a.device({10, 8}, dt), emb = a.device({0, 8}, dt);
    ops::embedding_forward(no_targets, table, emb);

    Tensor logits = a.device({0, 32}, dt), losses = a.device({0}, acc), lse = a.device({0}, acc);
    ops::cross_entropy_forward(logits, no_targets, losses, lse);
    ops::cross_entropy_backward_input(logits, no_targets, lse, 1.0, logits);
  }
}
