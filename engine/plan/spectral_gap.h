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
// eigenvalues are real and lie in [0, 1] and the gap lies in [0, 1]. For N = 1
// there is no second eigenvalue and the gap is reported as 1 (a single rank is
// trivially fully mixed).
//
// S is never formed at the world's size. Ranks with the same row of owns have
// the same row of B, so with U distinct owning rows, c_u ranks each and R the
// U x K matrix of those rows, B = P R' (P expands U rows to N, P^T P =
// diag(c), R' = D_u^-1/2 R). The nonzero eigenvalues of S = B B^T are those
// of the U x U matrix diag(c)^1/2 R' R'^T diag(c)^1/2, and equally of the
// K x K matrix R'^T diag(c) R'; the solver runs on the smaller one, and the
// other eigenvalues of S are 0 (rank deficiency) and 1 (isolated ranks). A
// cyclic plan has at most about 2K distinct rows whatever N is, so a
// 65,536-rank plan costs what its components cost.
#include <cstdint>
#include <vector>

namespace sdp {

// owns must be rectangular with at least one rank; validated by the caller.
// Fails with a message naming the sizes when the reduced matrix exceeds the
// memory this process may use.
double mask_graph_spectral_gap(const std::vector<std::vector<bool>>& owns);

// Bytes of the dense f64 dimension x dimension matrix the solver works on:
// dimension = min(distinct owning rows, components).
uint64_t spectral_gap_matrix_bytes(int64_t dimension);
// Throws sdp::Error when that matrix needs more than `usable_bytes`, naming
// the plan's ranks, distinct rows and components, the bytes, and the largest
// dimension that fits.
void check_spectral_gap_fits(int64_t ranks, int64_t distinct_rows, int64_t components,
                             uint64_t usable_bytes);

}  // namespace sdp
