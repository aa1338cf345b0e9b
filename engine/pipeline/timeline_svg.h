#pragma once
// Pipeline timelines as a standalone SVG picture: one panel per timeline
// (say, one per schedule, or a simulated and a measured run of one), stacked
// vertically. In a panel each stage is a row and x is time; every compute
// action is a rectangle coloured by kind (Okabe-Ito colours, distinct under
// the common colour-vision deficiencies), labelled with its micro-batch when
// the label fits; communication actions are thin bars at the bottom of the
// row (or left out); idle time stays blank. Each row ends with its bubble
// percentage (timeline_stats); each panel has a time axis with ticks, and a
// legend heads the picture.
//
// Structure a reader (or a test) can rely on: each panel is one
// <g class="panel">, each compute action one <rect class="action X"> with X
// the kind's letter (F, B, I, W), each drawn communication action one
// <rect class="comm">.
#include <string>
#include <vector>

#include "engine/pipeline/schedule.h"
#include "engine/pipeline/timeline.h"

namespace sdp::pipeline {

struct TimelinePanel {
  std::string title;
  Schedule schedule;
  Timeline timeline;
};

struct SvgOptions {
  double width = 1000.0;           // the picture's width in pixels
  double row_height = 22.0;        // one stage's row, pixels
  bool shared_time_scale = true;   // every panel on the longest panel's scale (else each its own)
  bool show_communication = true;  // thin bars for send/receive actions
  std::string time_unit = "s";     // written after the axis ticks
};

// Fails for no panels, a timeline that does not fit its schedule
// (check_timeline), or a width or row height too small to draw.
std::string timeline_svg(const std::vector<TimelinePanel>& panels, const SvgOptions& options = {});

// timeline_svg written atomically (engine/checkpoint/atomic_file.h).
void write_timeline_svg(const std::string& path, const std::vector<TimelinePanel>& panels,
                        const SvgOptions& options = {});

}  // namespace sdp::pipeline
