#pragma once
// Token embedding lookup and its weight gradient. Tokens are validated by the
// caller (kernels/ops_embedding.cpp); these kernels trust them.
#include <cstdint>

namespace sdp::cpu {

// out [n, d] = table[tokens[i]] for tokens [n], table [V, d].
template <typename T>
void embedding_forward(const int32_t* tokens, const T* table, T* out, int64_t n, int64_t d);

// dtable [V, d] += dout [n, d] scattered by tokens [n]. Threads split the d
// columns, each walking all tokens in order: repeated tokens never race and
// the sum order is fixed, so results are deterministic.
template <typename T>
void embedding_backward_weight(const int32_t* tokens, const T* dout, T* dtable, int64_t n,
                               int64_t d);

}  // namespace sdp::cpu
