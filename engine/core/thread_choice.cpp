#include "engine/core/thread_choice.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "engine/core/error.h"

namespace sdp {

namespace {

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

// The outermost level's count of an OMP_NUM_THREADS value ("4", " 4 ",
// "4,2"), as the OpenMP runtime reads it.
int omp_count(const std::string& value) {
  size_t i = 0;
  while (i < value.size() && std::isspace(static_cast<unsigned char>(value[i]))) ++i;
  long long count = 0;
  size_t digits = 0;
  for (; i < value.size() && std::isdigit(static_cast<unsigned char>(value[i])); ++i, ++digits) {
    count = count * 10 + (value[i] - '0');
    if (count > std::numeric_limits<int>::max()) break;
  }
  while (i < value.size() && std::isspace(static_cast<unsigned char>(value[i]))) ++i;
  const bool ends = i == value.size() || value[i] == ',';
  if (digits == 0 || !ends || count < 1 || count > std::numeric_limits<int>::max())
    fail("OMP_NUM_THREADS = '", value, "' is not a thread count (valid: an integer >= 1, or a "
         "comma-separated list of them whose first is the count; unset it to take this rank's "
         "share of its cores, or give --threads)");
  return static_cast<int>(count);
}

}  // namespace

ThreadChoice choose_threads(const ThreadChoiceInputs& in) {
  if (in.requested < 0) fail("choose_threads: requested = ", in.requested, " (valid: >= 0)");
  if (in.affinity_cores < 1 || in.ranks_on_node < 1 || in.ranks_sharing_cores < 1 ||
      in.ranks_sharing_cores > in.ranks_on_node || in.world < 1)
    fail("choose_threads: affinity_cores = ", in.affinity_cores, ", ranks_on_node = ",
         in.ranks_on_node, ", ranks_sharing_cores = ", in.ranks_sharing_cores, ", world = ",
         in.world, " (valid: each >= 1, ranks_sharing_cores <= ranks_on_node)");
  const bool ranks = in.world > 1;
  const char* per = ranks ? " per rank" : "";
  ThreadChoice c;
  if (in.requested > 0) {
    c.threads = in.requested;
    c.source = ThreadSource::requested;
    c.message = format("threads: ", c.threads, per, " (--threads)");
    return c;
  }
  if (in.omp_num_threads && !blank(*in.omp_num_threads)) {
    c.threads = omp_count(*in.omp_num_threads);
    c.source = ThreadSource::omp_num_threads;
    c.message = format("threads: ", c.threads, per, " (OMP_NUM_THREADS=", *in.omp_num_threads,
                       "; --threads to override)");
    return c;
  }
  c.threads = std::max(1, in.affinity_cores / in.ranks_sharing_cores);
  c.source = ThreadSource::share_of_cores;
  const std::string cores =
      format(in.affinity_cores, in.affinity_cores == 1 ? " core" : " cores", " in this ",
             ranks ? "rank" : "process", "'s affinity mask");
  std::string sharing;
  if (in.ranks_on_node > 1) {
    sharing = in.ranks_sharing_cores == in.ranks_on_node
                  ? format(", ", in.ranks_on_node, " ranks on this node")
                  : format(", used by ", in.ranks_sharing_cores, " of the ", in.ranks_on_node,
                           " ranks on this node");
  }
  c.message = format("threads: ", c.threads, per, " (", cores, sharing,
                     "; --threads or OMP_NUM_THREADS to override)");
  return c;
}

}  // namespace sdp
