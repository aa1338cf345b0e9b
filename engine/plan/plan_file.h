#pragma once
// An ownership plan written out (sdp-plan --write-plan, sdp-train --plan
// file:PATH): {"matrix": ["1010", "0101"]}, one row per rank, one column per
// component.
#include <string>
#include <vector>

#include "engine/plan/subnet_plan.h"

namespace sdp {

// The matrix [rank][component]. Fails naming the file when it is not of that
// form or its rows and columns are not `ranks` x `components`. Apart from
// the plan it makes, so that the reader builds alone (the fuzz targets).
std::vector<std::vector<bool>> read_plan_matrix(const std::string& path, int ranks,
                                                int components);

inline SubnetPlan read_plan_file(const std::string& path, int ranks, int components) {
  return SubnetPlan::from_matrix(read_plan_matrix(path, ranks, components));
}

}  // namespace sdp
