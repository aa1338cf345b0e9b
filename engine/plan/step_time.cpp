#include "engine/plan/step_time.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "comm/communicator.h"
#include "engine/core/error.h"
#include "engine/pipeline/schedule.h"
#include "engine/pipeline/schedule_simulator.h"

namespace sdp {

nlohmann::json LinkModel::to_json() const {
  return {{"latency_seconds", latency_seconds},
          {"intra_node_bytes_per_second", intra_node_bytes_per_second},
          {"inter_node_bytes_per_second", inter_node_bytes_per_second},
          {"ranks_per_node", ranks_per_node},
          {"overlap", overlap}};
}

nlohmann::json StepTimeModel::to_json() const {
  return {{"flops_per_second", flops_per_second}, {"link", link.to_json()}};
}

nlohmann::json StepTimeEstimate::to_json() const {
  return {{"compute_seconds", compute_seconds},
          {"comm_seconds", comm_seconds},
          {"exposed_comm_seconds", exposed_comm_seconds},
          {"seconds", seconds}};
}

namespace {

// Whether a group's ranks sit on more than one node.
bool spans_nodes(const std::string& group, int world, int ranks_per_node) {
  if (ranks_per_node <= 0) return false;
  constexpr std::string_view prefix = "ranks:";
  // "world", or a name of another form: the whole world.
  if (group.rfind(prefix, 0) != 0) return world > ranks_per_node;
  const std::vector<int> ranks = comm::parse_rank_list(group.substr(prefix.size()));
  for (int r : ranks)
    if (r / ranks_per_node != ranks.front() / ranks_per_node) return true;
  return false;
}

double traffic_seconds(const LinkModel& link, const comm::Traffic& traffic, bool inter_node) {
  const double bandwidth =
      inter_node ? link.inter_node_bytes_per_second : link.intra_node_bytes_per_second;
  return static_cast<double>(traffic.latency_steps) * link.latency_seconds +
         traffic.sent_bytes / bandwidth;
}

// Ops whose collectives may run beside compute (see step_time.h).
bool overlappable(comm::Op op) {
  return op == comm::Op::all_gather || op == comm::Op::reduce_scatter ||
         op == comm::Op::all_reduce;
}

bool point_to_point(comm::Op op) { return op == comm::Op::send || op == comm::Op::recv; }

// The ops in name order: the sums below add them in the order the metrics
// JSON lists them, so that an estimate is the same to the last bit.
std::array<comm::Op, comm::kOpCount> ops_by_name() {
  std::array<comm::Op, comm::kOpCount> ops;
  for (size_t i = 0; i < comm::kOpCount; ++i) ops[i] = static_cast<comm::Op>(i);
  std::sort(ops.begin(), ops.end(),
            [](comm::Op a, comm::Op b) { return comm::op_name(a) < comm::op_name(b); });
  return ops;
}

// Seconds of every collective of `comm`, and of those that may overlap
// compute; a pipeline's sends to its neighbours are left out when
// `skip_point_to_point` (the simulator's makespan has them).
struct CommSeconds {
  double total = 0, overlappable = 0;
};

CommSeconds comm_seconds(const LinkModel& link, const comm::CommStats& comm, int world,
                         bool skip_point_to_point) {
  static const std::array<comm::Op, comm::kOpCount> kOps = ops_by_name();
  CommSeconds out;
  for (const auto& [name, by_op] : comm.by_group_op()) {
    const bool inter_node = spans_nodes(name, world, link.ranks_per_node);
    for (comm::Op op : kOps) {
      const comm::Traffic& traffic = by_op[static_cast<size_t>(op)];
      if (traffic.calls == 0 || (skip_point_to_point && point_to_point(op))) continue;
      const double t = traffic_seconds(link, traffic, inter_node);
      out.total += t;
      if (overlappable(op)) out.overlappable += t;
    }
  }
  return out;
}

void check_model(const StepTimeModel& m) {
  if (!(m.flops_per_second > 0))
    fail("step-time model: flops_per_second = ", m.flops_per_second, " (valid: > 0)");
  if (!(m.link.latency_seconds >= 0))
    fail("step-time model: latency = ", m.link.latency_seconds, " s (valid: >= 0)");
  if (!(m.link.intra_node_bytes_per_second > 0) || !(m.link.inter_node_bytes_per_second > 0))
    fail("step-time model: link bandwidths ", m.link.intra_node_bytes_per_second, " and ",
         m.link.inter_node_bytes_per_second, " bytes/s (valid: > 0)");
}

}  // namespace

StepTimeEstimate estimate_step(const StepTimeModel& model, double flops,
                               const comm::CommStats& comm, int world) {
  check_model(model);
  StepTimeEstimate e;
  e.compute_seconds = flops / model.flops_per_second;
  const CommSeconds c = comm_seconds(model.link, comm, world, false);
  e.comm_seconds = c.total;
  e.exposed_comm_seconds =
      model.link.overlap
          ? std::max(0.0, c.overlappable - e.compute_seconds) + (c.total - c.overlappable)
          : c.total;
  e.seconds = e.compute_seconds + e.exposed_comm_seconds;
  return e;
}

StepTimeEstimate estimate_pipeline_step(const StepTimeModel& model,
                                        const std::vector<double>& stage_flops,
                                        const std::vector<int64_t>& boundary_bytes,
                                        const std::string& schedule_name, int micro_batches,
                                        const comm::CommStats& replica_comm, int world) {
  check_model(model);
  const int P = static_cast<int>(stage_flops.size());
  SDP_CHECK(P >= 2 && static_cast<int>(boundary_bytes.size()) == P - 1,
            "estimate_pipeline_step: ", P, " stages and ", boundary_bytes.size(),
            " boundaries");
  constexpr std::string_view file_prefix = "file:";
  const pipeline::Schedule schedule =
      schedule_name.rfind(file_prefix, 0) == 0
          ? pipeline::load_schedule(schedule_name.substr(file_prefix.size()))
          : pipeline::make_schedule(schedule_name, P, micro_batches);
  pipeline::SimulationCosts costs;
  for (double f : stage_flops) {
    const double per_micro_batch = f / micro_batches / model.flops_per_second;
    pipeline::StageCosts s;
    s.forward = per_micro_batch / 3;
    s.backward = 2 * per_micro_batch / 3;
    s.input_grad = s.weight_grad = per_micro_batch / 3;
    costs.stages.push_back(s);
  }
  costs.boundary_bytes = boundary_bytes;
  costs.hop_latency = model.link.latency_seconds;
  // Stages sit on different nodes once a stage's replicas fill one.
  const int replicas = world / P;
  costs.link_bandwidth = model.link.ranks_per_node > 0 && replicas >= model.link.ranks_per_node
                             ? model.link.inter_node_bytes_per_second
                             : model.link.intra_node_bytes_per_second;
  const pipeline::SimulationResult sim = pipeline::simulate(schedule, costs);

  StepTimeEstimate e;
  e.compute_seconds = sim.makespan;
  const CommSeconds c = comm_seconds(model.link, replica_comm, world, true);
  e.comm_seconds = c.total;
  e.exposed_comm_seconds = c.total;
  e.seconds = e.compute_seconds + e.exposed_comm_seconds;
  return e;
}

double replica_comm_seconds(const StepTimeModel& model, const comm::CommStats& comm, int world) {
  return comm_seconds(model.link, comm, world, true).total;
}

}  // namespace sdp
