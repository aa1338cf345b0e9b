#include "engine/plan/plan_repair.h"

#include <algorithm>
#include <cstddef>
#include <set>
#include <utility>

namespace sdp {

namespace {

using Matrix = std::vector<std::vector<bool>>;

// A swap: rank a gives up component x and takes y, rank b gives up y and
// takes x (a owns x and not y, b owns y and not x). Every rank's and every
// component's count stays.
void swap_ownership(Matrix& owns, size_t a, size_t x, size_t b, size_t y) {
  owns[a][x] = false;
  owns[a][y] = true;
  owns[b][y] = false;
  owns[b][x] = true;
}

// The bipartite rank/component graph: vertices 0 .. N - 1 the ranks, N + k
// component k, an edge per ownership.
struct MaskGraph {
  std::vector<std::vector<int>> adjacent;
  std::vector<int> label;  // connected component of each vertex
  int parts = 0;
  std::set<std::pair<int, int>> bridges;  // (rank, N + component)

  explicit MaskGraph(const Matrix& owns) {
    const int N = static_cast<int>(owns.size()), K = static_cast<int>(owns[0].size());
    adjacent.resize(static_cast<size_t>(N + K));
    for (int i = 0; i < N; ++i)
      for (int k = 0; k < K; ++k)
        if (owns[static_cast<size_t>(i)][static_cast<size_t>(k)]) {
          adjacent[static_cast<size_t>(i)].push_back(N + k);
          adjacent[static_cast<size_t>(N + k)].push_back(i);
        }
    find_parts_and_bridges();
  }

  // One iterative depth-first search: labels and low links (Tarjan).
  void find_parts_and_bridges() {
    const size_t V = adjacent.size();
    label.assign(V, -1);
    std::vector<int> depth(V, -1), low(V, 0), parent(V, -1);
    std::vector<size_t> next(V, 0);
    for (size_t root = 0; root < V; ++root) {
      if (label[root] >= 0) continue;
      std::vector<int> stack{static_cast<int>(root)};
      depth[root] = low[root] = 0;
      label[root] = parts;
      while (!stack.empty()) {
        const auto v = static_cast<size_t>(stack.back());
        if (next[v] < adjacent[v].size()) {
          const int w = adjacent[v][next[v]++];
          const auto uw = static_cast<size_t>(w);
          if (depth[uw] < 0) {
            depth[uw] = low[uw] = depth[v] + 1;
            parent[uw] = static_cast<int>(v);
            label[uw] = parts;
            stack.push_back(w);
          } else if (w != parent[v]) {  // no multi-edges: the parent edge is the only one
            low[v] = std::min(low[v], depth[uw]);
          }
        } else {
          stack.pop_back();
          const int p = parent[v];
          if (p >= 0) {
            const auto up = static_cast<size_t>(p);
            low[up] = std::min(low[up], low[v]);
            if (low[v] > depth[up])
              bridges.insert({std::min(p, static_cast<int>(v)), std::max(p, static_cast<int>(v))});
          }
        }
      }
      ++parts;
    }
  }
};

}  // namespace

std::vector<std::vector<int>> class_counts(const Matrix& owns, const std::vector<int>& classes,
                                           int class_count) {
  std::vector<std::vector<int>> count(owns.size(), std::vector<int>(static_cast<size_t>(class_count)));
  for (size_t i = 0; i < owns.size(); ++i)
    for (size_t k = 0; k < classes.size(); ++k)
      if (owns[i][k]) ++count[i][static_cast<size_t>(classes[k])];
  return count;
}

void cover_classes(Matrix& owns, const std::vector<int>& classes) {
  if (classes.empty()) return;
  const int S = *std::max_element(classes.begin(), classes.end()) + 1;
  auto count = class_counts(owns, classes, S);
  const size_t N = owns.size(), K = classes.size();
  for (size_t a = 0; a < N; ++a) {
    // A rank holding fewer components than classes cannot hold them all;
    // one holding at least S but missing one holds some class twice.
    if (std::count(owns[a].begin(), owns[a].end(), true) < S) continue;
    for (size_t s = 0; s < static_cast<size_t>(S); ++s) {
      for (size_t b = 0; b < N && count[a][s] == 0; ++b) {
        if (count[b][s] < 2) continue;
        size_t x = 0;  // any of b's components of class s: a holds none of them
        while (static_cast<size_t>(classes[x]) != s || !owns[b][x]) ++x;
        for (size_t y = 0; y < K; ++y) {
          const auto t = static_cast<size_t>(classes[y]);
          if (!owns[a][y] || owns[b][y] || count[a][t] < 2) continue;
          swap_ownership(owns, a, y, b, x);  // a: y for x; b: x for y
          --count[a][t], ++count[a][s], --count[b][s], ++count[b][t];
          break;
        }
      }
    }
  }
}

void join_parts(Matrix& owns, const std::vector<int>& classes) {
  const int N = static_cast<int>(owns.size()), K = static_cast<int>(owns[0].size());
  int64_t edges = 0;
  for (const auto& row : owns) edges += std::count(row.begin(), row.end(), true);
  if (N == 1 || edges < static_cast<int64_t>(N) + K - 1) return;
  const int S = classes.empty() ? 0 : *std::max_element(classes.begin(), classes.end()) + 1;
  for (;;) {
    const MaskGraph g(owns);
    if (g.parts == 1) return;
    const auto counts = class_counts(owns, classes, S);
    // A swap keeps coverage when the classes match or both ranks keep one.
    const auto keeps = [&](int a, int x, int b, int y) {
      if (classes.empty()) return true;
      const int cx = classes[static_cast<size_t>(x)], cy = classes[static_cast<size_t>(y)];
      return cx == cy || (counts[static_cast<size_t>(a)][static_cast<size_t>(cx)] >= 2 &&
                          counts[static_cast<size_t>(b)][static_cast<size_t>(cy)] >= 2);
    };
    bool swapped = false;
    for (int a = 0; a < N && !swapped; ++a)
      for (int xv : g.adjacent[static_cast<size_t>(a)]) {
        if (g.bridges.count({a, xv})) continue;
        const int part = g.label[static_cast<size_t>(a)];
        for (int b = 0; b < N && !swapped; ++b) {
          if (g.label[static_cast<size_t>(b)] == part) continue;
          for (int yv : g.adjacent[static_cast<size_t>(b)])
            if (keeps(a, xv - N, b, yv - N)) {
              swap_ownership(owns, static_cast<size_t>(a), static_cast<size_t>(xv - N),
                             static_cast<size_t>(b), static_cast<size_t>(yv - N));
              swapped = true;
              break;
            }
        }
        if (swapped) break;
      }
    if (!swapped) return;
  }
}
}  // namespace sdp
