// Names, the ring formulas of docs/ARCHITECTURE.md "Measurements", and the per-rank
// counters every collective adds to.
#include "comm/communicator.h"

namespace sdp::comm {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::all_reduce: return "all_reduce";
    case Op::reduce_scatter: return "reduce_scatter";
    case Op::all_gather: return "all_gather";
    case Op::broadcast: return "broadcast";
    case Op::send: return "send";
    case Op::recv: return "recv";
    case Op::barrier: return "barrier";
  }
  return "?";
}

std::string_view reduce_op_name(ReduceOp op) {
  return op == ReduceOp::sum ? "sum" : "average";
}

double ring_sent_bytes(Op op, int group_size, int64_t payload_bytes, bool is_root) {
  SDP_CHECK(group_size >= 1, "ring_sent_bytes: group size ", group_size,
            " is invalid (valid: >= 1)");
  SDP_CHECK(payload_bytes >= 0, "ring_sent_bytes: payload ", payload_bytes,
            " bytes is invalid (valid: >= 0)");
  const double k = group_size;
  // Multiply before dividing: the count is then exact whenever it is an
  // integer (2 * 3 * 4000 / 4 = 6000, not 5999.999...).
  const double s = static_cast<double>(payload_bytes);
  switch (op) {
    case Op::all_reduce: return 2.0 * (k - 1) * s / k;
    case Op::reduce_scatter:
    case Op::all_gather: return (k - 1) * s / k;
    case Op::broadcast: return is_root && group_size > 1 ? s : 0.0;
    case Op::send: return s;
    case Op::recv:
    case Op::barrier: return 0.0;
  }
  return 0.0;
}

int64_t ring_latency_steps(Op op, int group_size) {
  SDP_CHECK(group_size >= 1, "ring_latency_steps: group size ", group_size,
            " is invalid (valid: >= 1)");
  if (group_size == 1) return 0;
  const int64_t k = group_size;
  switch (op) {
    case Op::all_reduce: return 2 * (k - 1);
    case Op::reduce_scatter:
    case Op::all_gather:
    case Op::broadcast:
    case Op::barrier: return k - 1;
    case Op::send:
    case Op::recv: return 1;
  }
  return 0;
}

void CommStats::record(Op op, const std::string& group, int group_size, int64_t payload_bytes,
                       bool is_root) {
  const Traffic call{1, payload_bytes, ring_sent_bytes(op, group_size, payload_bytes, is_root),
                     ring_latency_steps(op, group_size)};
  by_op_[static_cast<size_t>(op)].add(call);
  by_group_[group].add(call);
  by_group_op_[group][static_cast<size_t>(op)].add(call);
}

Traffic CommStats::total() const {
  Traffic sum;
  for (const Traffic& t : by_op_) sum.add(t);
  return sum;
}

void CommStats::reset() {
  by_op_ = {};
  by_group_.clear();
  by_group_op_.clear();
  wait_seconds_ = 0;
}

namespace {
nlohmann::json traffic_json(const Traffic& t) {
  return {{"calls", t.calls},
          {"payload_bytes", t.payload_bytes},
          {"sent_bytes", t.sent_bytes},
          {"latency_steps", t.latency_steps}};
}
}  // namespace

nlohmann::json CommStats::to_json() const {
  nlohmann::json out = traffic_json(total());
  // Every op appears, called or not, so that per-step lines share one schema;
  // groups appear once they have been used.
  nlohmann::json ops = nlohmann::json::object();
  for (size_t i = 0; i < kOpCount; ++i)
    ops[std::string(op_name(static_cast<Op>(i)))] = traffic_json(by_op_[i]);
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [name, traffic] : by_group_) {
    nlohmann::json group = traffic_json(traffic);
    nlohmann::json group_ops = nlohmann::json::object();
    const auto& per_op = by_group_op_.at(name);
    for (size_t i = 0; i < kOpCount; ++i)
      if (per_op[i].calls > 0) group_ops[std::string(op_name(static_cast<Op>(i)))] = traffic_json(per_op[i]);
    group["by_op"] = std::move(group_ops);
    groups[name] = std::move(group);
  }
  out["wait_seconds"] = wait_seconds_;
  out["by_op"] = std::move(ops);
  out["by_group"] = std::move(groups);
  return out;
}

}  // namespace sdp::comm
