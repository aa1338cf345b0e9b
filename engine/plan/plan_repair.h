#pragma once
// Count-preserving repairs of an ownership matrix ([rank][component]) after
// a construction (subnet_plan.h): each is a sequence of swaps in which one
// rank trades a component with another, so every rank's count and every
// component's owner count stay as the construction made them.
#include <vector>

namespace sdp {

// Components of each class a rank holds: [rank][class]. classes[k] is the
// class (sublayer) of component k, in [0, class_count).
std::vector<std::vector<int>> class_counts(const std::vector<std::vector<bool>>& owns,
                                           const std::vector<int>& classes, int class_count);

// Gives every rank a component of every class where swaps can: a rank a
// missing class s takes a component x of s from a rank b that holds two of
// s, handing b a component y of a class a holds twice (which b lacks). Each
// swap covers one (rank, class) pair and uncovers none.
void cover_classes(std::vector<std::vector<bool>>& owns, const std::vector<int>& classes);

// Joins a disconnected plan whose counts allow a connected one (m N >= N +
// K - 1: then some part has a cycle). Swapping a cycle edge (a, x) of one
// part with any edge (b, y) of another keeps the first part connected, and
// the new edges (a, y), (b, x) tie both halves of the second to it: one part
// fewer per swap. Swaps that would uncover a class are skipped; where none
// is left, the plan stays as it is (its spectral gap says 0).
void join_parts(std::vector<std::vector<bool>>& owns, const std::vector<int>& classes);

}  // namespace sdp
