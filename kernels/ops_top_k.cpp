// Dispatch for the top-k correct counts of a classifier's logits.
#include <algorithm>

#include "kernels/cpu/top_k.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/top_k.h"
static_assert(sdp::cuda::kTopKLimit == sdp::ops::kMaxTopK, "the CUDA kernel counts every k");
#endif

namespace sdp::ops {

void count_top_k(const Tensor& logits, const Tensor& targets, std::span<const int> ks,
                 std::span<int64_t> correct) {
  constexpr const char* op = "count_top_k";
  detail::expect_float(logits, op, "logits");
  expect_contiguous(logits, op, "logits");
  detail::leading_rows(logits, op, "logits");
  const int64_t v = logits.size(-1);
  if (v < 1) fail(op, ": logits ", logits.describe(), " has no classes (V must be >= 1)");
  expect_same_device(targets, logits, op);
  expect_dtype(targets, DType::i32, op, "targets");
  expect_contiguous(targets, op, "targets");
  expect_shape(targets, detail::without_last_dim(logits), op, "targets");
  if (ks.empty() || ks.size() > static_cast<size_t>(kMaxTopK))
    fail(op, ": ", ks.size(), " values of k given (valid: 1 to ", kMaxTopK, ")");
  if (correct.size() != ks.size())
    fail(op, ": ", correct.size(), " counts for ", ks.size(), " values of k (one each)");
  for (size_t i = 0; i < ks.size(); ++i)
    if (ks[i] < 1 || (i > 0 && ks[i] <= ks[i - 1]))
      fail(op, ": k = ", ks[i], " at position ", i,
           " (valid: k >= 1, each larger than the one before)");
  std::fill(correct.begin(), correct.end(), 0);
  const int64_t n = targets.numel();
  const int nk = static_cast<int>(ks.size());
  switch (detail::backend_of(logits, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::count_top_k(logits, targets, ks.data(), nk, correct.data()));
      return;
    case detail::Backend::cpu: break;
  }
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    if (t[i] >= v)
      fail(op, ": target ", t[i], " at row ", i, " is out of range (valid: 0 to ", v - 1,
           " for V = ", v, ", or negative to ignore the row)");
  detail::on_float_dtype(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::count_top_k<T>(logits.data<T>(), t, n, v, ks.data(), nk, correct.data());
  });
}

}  // namespace sdp::ops
