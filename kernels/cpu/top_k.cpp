#include "kernels/cpu/top_k.h"

#include <cmath>

namespace sdp::cpu {

template <typename T>
void count_top_k(const T* logits, const int32_t* targets, int64_t n, int64_t v, const int* ks,
                 int nk, int64_t* correct) {
  for (int i = 0; i < nk; ++i) correct[i] = 0;
  // Rows are few (a classifier's batch): one pass each, in order.
  for (int64_t row = 0; row < n; ++row) {
    const int32_t t = targets[row];
    if (t < 0) continue;
    const T* x = logits + row * v;
    const T mine = x[t];
    int64_t rank = 0;  // classes ranked before the target
    bool nan = std::isnan(mine);
    for (int64_t j = 0; j < v && !nan; ++j) {
      nan = std::isnan(x[j]);
      rank += x[j] > mine || (x[j] == mine && j < t);
    }
    if (nan) continue;
    for (int i = 0; i < nk; ++i) correct[i] += rank < ks[i];
  }
}

template void count_top_k<float>(const float*, const int32_t*, int64_t, int64_t, const int*, int,
                                 int64_t*);
template void count_top_k<double>(const double*, const int32_t*, int64_t, int64_t, const int*,
                                  int, int64_t*);

}  // namespace sdp::cpu
