#pragma once
// The spectral gap of a plan's mask graph: how fast parameter information
// mixes between ranks through the components they co-own. A larger gap means
// the ranks' subnetworks overlap more evenly, so updates reach every rank in
// fewer steps; DDP is the maximum (1), ranks that share nothing the minimum (0).
//
// Definition (owns is [rank][component], N ranks):
//   A[i][j] = number of components owned by both rank i and rank j
//             (so A[i][i] = number of components rank i owns);
//   D       = diag(row sums of A);
//   W       = D^-1 A, a row-stochastic random walk on ranks. A rank that owns
//             nothing has a zero row: it is treated as isolated, W[i][i] = 1;
//   gap     = 1 - lambda_2(W), lambda_2 the second-largest eigenvalue.
// W is similar to S = D^-1/2 A D^-1/2 = B B^T (B = D^-1/2 owns), so its
// eigenvalues are real and lie in [0, 1] and the gap lies in [0, 1]; they are
// computed on the symmetric S. For N = 1 there is no second eigenvalue and the
// gap is reported as 1 (a single rank is trivially fully mixed).
#include <cstdint>
#include <vector>

namespace sdp {

// owns must be rectangular with at least one rank; validated by the caller.
// Fails with a message saying which worlds fit when the dense ranks x ranks
// matrix exceeds the memory this process may use.
double mask_graph_spectral_gap(const std::vector<std::vector<bool>>& owns);

// Bytes of the dense f64 ranks x ranks matrix the gap is computed on.
uint64_t spectral_gap_matrix_bytes(int64_t ranks);
// Throws sdp::Error when that matrix needs more than `usable_bytes`, naming
// the world, the bytes, and the largest world that fits.
void check_spectral_gap_fits(int64_t ranks, uint64_t usable_bytes);

}  // namespace sdp
