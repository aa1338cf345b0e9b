// A calibration (step_time.h): the metrics reader, the step records of an
// sdp-train --metrics file, each field checked where it is read so that a
// bad file fails naming the file, the line and the field; and the fit of the
// step-time model's rates to them, refused outside calibration_limits. Apart
// from the step-time model's estimates, so that it builds alone (the fuzz
// targets compile it).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/core/config_limits.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/plan/step_time.h"

namespace sdp {

namespace {

namespace C = calibration_limits;

// A record's field as a number within [lo, hi] (lo itself excluded when
// `open_lo`); `where` names the file and line.
double number_field(const nlohmann::json& record, const char* key, const std::string& where,
                    double lo, double hi, bool open_lo, const char* unit) {
  const auto it = record.find(key);
  const bool ok = it != record.end() && it->is_number() && std::isfinite(it->get<double>()) &&
                  (open_lo ? it->get<double>() > lo : it->get<double>() >= lo) &&
                  it->get<double>() <= hi;
  if (!ok)
    fail("--calibrate: ", where, ": field '", key, "' = ",
         it == record.end() ? std::string("(missing)") : it->dump(), " is invalid (valid: ",
         unit, " in ", open_lo ? "(" : "[", lo, ", ", hi, "])");
  return it->get<double>();
}

// A comm record's count, 0 where the record leaves it out (a run without
// collectives).
double comm_count(const nlohmann::json& comm, const char* key, const std::string& where,
                  double hi, const char* unit) {
  if (!comm.contains(key)) return 0;
  return number_field(comm, key, where, 0, hi, false, unit);
}

// The files a calibration read, for its messages.
std::string run_paths(const std::vector<MeasuredRun>& runs) {
  std::string out;
  for (const MeasuredRun& r : runs) out += (out.empty() ? "'" : ", '") + r.path + "'";
  return out;
}

// A fitted rate outside what any device or link reaches comes from
// implausible measurements (a step of 1e-300 s, 1e308 FLOPs): refused,
// never printed as inf or 0.
void check_calibrated(const StepTimeModel& m, const std::vector<MeasuredRun>& runs) {
  namespace C = calibration_limits;
  if (!(m.flops_per_second >= C::kMinFlopsPerSecond && m.flops_per_second <= C::kMaxFlopsPerSecond))
    fail("--calibrate: the FLOP rate fitted from ", run_paths(runs), " is ", m.flops_per_second,
         " FLOP/s per rank (valid: ", C::kMinFlopsPerSecond, " to ", C::kMaxFlopsPerSecond,
         "); the files' \"flops\" and \"seconds\" are not those of a real run");
  if (!(m.link.latency_seconds >= 0 && m.link.latency_seconds <= C::kMaxLatencySeconds))
    fail("--calibrate: the link latency fitted from ", run_paths(runs), " is ",
         m.link.latency_seconds, " s per latency step (valid: 0 to ", C::kMaxLatencySeconds,
         " s); the files' \"wait_seconds\" and \"latency_steps\" are not those of a real run");
  const double bw = m.link.intra_node_bytes_per_second;
  if (!(bw >= C::kMinBytesPerSecond && bw <= C::kMaxBytesPerSecond))
    fail("--calibrate: the link bandwidth fitted from ", run_paths(runs), " is ", bw,
         " bytes/s (valid: ", C::kMinBytesPerSecond, " to ", C::kMaxBytesPerSecond,
         "); the files' \"wait_seconds\" and \"sent_bytes\" are not those of a real run");
}

}  // namespace

double MeasuredRun::median_seconds() const {
  SDP_CHECK(!seconds.empty(), "metrics '", path, "': no steps");
  std::vector<double> v = seconds;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

MeasuredRun read_metrics(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail("--calibrate: cannot read '", path, "' (",
         std::filesystem::exists(path, ec) ? "not a regular file" : "no such file",
         "; valid: the --metrics file of an sdp-train run)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--calibrate: cannot read '", path, "'");
  MeasuredRun run;
  run.path = path;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const bool terminated = !in.eof();
    if (line.empty()) continue;
    const std::string where = format("'", path, "' line ", number);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      if (!terminated) {
        // A run killed mid-write leaves its last line without the newline.
        run.skipped_cut_line = format("--calibrate: ", where,
                                      " is cut off (a run stopped while writing it); skipped");
        break;
      }
      fail("--calibrate: ", where, " is not JSON (",
           line.size() > 60 ? line.substr(0, 60) + "..." : line,
           "; valid: one JSON object per line, as sdp-train --metrics writes)");
    }
    // Step records carry "step", "seconds", "flops" and "comm"; the summary
    // and evaluation records do not.
    if (!j.is_object() || !j.contains("step") || !j.contains("seconds") || !j.contains("flops") ||
        !j.contains("comm"))
      continue;
    (void)json_integer<int64_t>(j["step"], format("--calibrate: ", where, ": field 'step'"), 0,
                                config_limits::kSteps);
    const double seconds = number_field(j, "seconds", where, 0, C::kMaxStepSeconds, true,
                                        "a step time in seconds");
    const double flops = number_field(j, "flops", where, 0, 1e30, false, "a FLOP count");
    const nlohmann::json& comm = j["comm"];
    if (!comm.is_object())
      fail("--calibrate: ", where, ": field 'comm' = ", comm.dump(),
           " is invalid (valid: the object of the step's collectives)");
    const double wait =
        comm_count(comm, "wait_seconds", where, C::kMaxStepSeconds, "seconds waited");
    const double sent = comm_count(comm, "sent_bytes", where, 1e30, "a byte count");
    const double steps = comm_count(comm, "latency_steps", where, 1e30, "a count");
    if (j.contains("ranks")) {
      const nlohmann::json& ranks = j["ranks"];
      const nlohmann::json* by_rank = nullptr;
      if (ranks.is_object() && ranks.contains("flops") && ranks["flops"].is_object() &&
          ranks["flops"].contains("by_rank"))
        by_rank = &ranks["flops"]["by_rank"];
      if (by_rank) {
        if (!by_rank->is_array() || by_rank->empty() ||
            by_rank->size() > static_cast<size_t>(config_limits::kWorld))
          fail("--calibrate: ", where, ": field 'ranks.flops.by_rank' is invalid (valid: a list ",
               "of one FLOP count per rank, 1 to ", config_limits::kWorld, " ranks)");
        run.world = static_cast<int>(by_rank->size());
      }
    }
    run.seconds.push_back(seconds);
    run.flops.push_back(flops);
    run.wait_seconds.push_back(wait);
    run.sent_bytes.push_back(sent);
    run.latency_steps.push_back(steps);
  }
  if (in.bad()) fail("--calibrate: cannot read '", path, "'");
  if (run.seconds.empty())
    fail("--calibrate: '", path, "' has no step records (valid: the --metrics file of an "
         "sdp-train run)");
  if (run.seconds.size() > 1) {
    for (auto* v : {&run.seconds, &run.flops, &run.wait_seconds, &run.sent_bytes,
                    &run.latency_steps})
      v->erase(v->begin());
  }
  return run;
}

StepTimeModel calibrate(const std::vector<MeasuredRun>& runs, const StepTimeModel& start) {
  SDP_CHECK(!runs.empty(), "calibrate: no runs");
  StepTimeModel m = start;
  m.link.overlap = false;
  std::vector<double> rates;
  for (const MeasuredRun& r : runs)
    for (size_t i = 0; i < r.seconds.size(); ++i) {
      const double compute = r.seconds[i] - r.wait_seconds[i];
      if (compute > 0 && r.flops[i] > 0) rates.push_back(r.flops[i] / compute);
    }
  if (rates.empty())
    fail("--calibrate: no step with FLOPs and compute time in ", runs.front().path);
  std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2),
                   rates.end());
  m.flops_per_second = rates[rates.size() / 2];

  // wait = a x steps + b x bytes, least squares, a and b >= 0 (b = 1 / bandwidth).
  double sxx = 0, sxy = 0, syy = 0, sxw = 0, syw = 0;
  for (const MeasuredRun& r : runs)
    for (size_t i = 0; i < r.seconds.size(); ++i) {
      const double x = r.latency_steps[i], y = r.sent_bytes[i], w = r.wait_seconds[i];
      sxx += x * x;
      sxy += x * y;
      syy += y * y;
      sxw += x * w;
      syw += y * w;
    }
  if (syy <= 0) {  // no bytes sent: nothing to fit
    check_calibrated(m, runs);
    return m;
  }
  double a = 0, b = syw / syy;
  const double det = sxx * syy - sxy * sxy;
  if (sxx > 0 && det > 1e-12 * sxx * syy) {
    a = (sxw * syy - syw * sxy) / det;
    b = (syw * sxx - sxw * sxy) / det;
    if (a < 0) {
      a = 0;
      b = syw / syy;
    } else if (b <= 0) {
      b = 0;
      a = sxw / sxx;
    }
  }
  // b = 0 (or next to it): the bytes explained none of the waiting, a free
  // link, written as the largest bandwidth a calibration gives.
  constexpr double kFree = calibration_limits::kMaxBytesPerSecond;
  m.link.intra_node_bytes_per_second = m.link.inter_node_bytes_per_second =
      b > 1 / kFree ? 1 / b : kFree;
  m.link.latency_seconds = a;
  check_calibrated(m, runs);
  return m;
}

}  // namespace sdp
