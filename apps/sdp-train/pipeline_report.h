#pragma once
// What sdp-train shows of a pipeline: the schedule drawn before it runs, and
// after the run the last step's measured timeline beside the one simulated
// from that step's measured action costs (--pipeline-timeline DIR).
#include <string>

#include "engine/train/trainer.h"

namespace sdp::app {

// Rank 0 (or the emulated process): DIR/schedule.json (the explicit form the
// stages run) and DIR/schedule.svg (at uniform costs), and returns the
// simulated makespan, bubble and in-flight peak per stage as text.
std::string draw_schedule(const Trainer& trainer, const std::string& dir);

// Collective: every rank's timings of the latest step reach rank 0, which
// writes DIR/timeline.json (replica 0's stages, measured), DIR/costs.json
// (the measured mean cost of each action kind per stage and the boundary
// bytes, the form sdp-pipeline --costs reads) and DIR/timeline.svg
// (simulated from those costs, then measured), and returns the measured and
// simulated bubbles as text ("" elsewhere). An emulated rank (the other
// stages did not run) writes only DIR/stage<k>_actions.json: its own
// stage's actions with their measured start and end.
std::string write_measured_timeline(Trainer& trainer, const std::string& dir);

}  // namespace sdp::app
