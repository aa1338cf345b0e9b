#include "engine/pipeline/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "engine/checkpoint/atomic_file.h"
#include "engine/core/error.h"

namespace sdp::pipeline {

namespace {

// Layout, pixels.
constexpr double kLeft = 64;        // row labels
constexpr double kRight = 64;       // bubble percentages
constexpr double kLegend = 30;      // legend band at the top
constexpr double kTitle = 22;       // a panel's title line
constexpr double kRowGap = 3;
constexpr double kAxis = 28;        // axis line, ticks and their labels
constexpr double kPanelGap = 12;
constexpr double kCommHeight = 3;   // communication bars
constexpr double kDigitWidth = 6.2; // at font-size 10, for deciding whether a label fits

struct KindStyle {
  const char* letter;
  const char* name;
  const char* fill;
  const char* text;  // label colour readable on the fill
};

// Okabe-Ito: blue, orange, bluish green, reddish purple.
KindStyle style_of(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return {"F", "forward", "#0072B2", "#FFFFFF"};
    case ActionKind::backward: return {"B", "backward", "#E69F00", "#000000"};
    case ActionKind::input_grad: return {"I", "input grad", "#009E73", "#FFFFFF"};
    case ActionKind::weight_grad: return {"W", "weight grad", "#CC79A7", "#000000"};
    default: return {"C", "send / recv", "#555555", "#FFFFFF"};
  }
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string short_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// 1, 2 or 5 times a power of ten, giving about `target` ticks over `span`.
double tick_step(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
}

double panel_height(const TimelinePanel& p, const SvgOptions& o) {
  return kTitle + p.schedule.num_stages() * (o.row_height + kRowGap) + kAxis + kPanelGap;
}

void legend(std::string& svg) {
  double x = kLeft;
  for (ActionKind kind : {ActionKind::forward, ActionKind::backward, ActionKind::input_grad,
                          ActionKind::weight_grad, ActionKind::send_activation}) {
    const KindStyle s = style_of(kind);
    const bool comm = !runs_compute(kind);
    svg += "<rect class=\"legend\" x=\"" + num(x) + "\" y=\"" + num(comm ? 15 : 8) + "\" width=\"14\" height=\"" +
           num(comm ? kCommHeight : 14) + "\" fill=\"" + s.fill + "\"/>\n";
    const std::string label = comm ? std::string("send / recv") : std::string(s.letter) + " " + s.name;
    svg += "<text x=\"" + num(x + 18) + "\" y=\"19\">" + escape(label) + "</text>\n";
    x += 18 + kDigitWidth * static_cast<double>(label.size()) + 16;
  }
  svg += "<text x=\"" + num(x) + "\" y=\"19\" fill=\"#555555\">right: bubble % per stage</text>\n";
}

void panel(std::string& svg, const TimelinePanel& p, const SvgOptions& o, double y0, double span) {
  const TimelineStats stats = timeline_stats(p.schedule, p.timeline);
  const double plot_width = o.width - kLeft - kRight;
  const double px = plot_width / span;
  const int P = p.schedule.num_stages();
  svg += "<g class=\"panel\">\n";
  svg += "<text x=\"" + num(kLeft) + "\" y=\"" + num(y0 + 15) + "\" font-weight=\"bold\">" +
         escape(p.title) + " (step " + escape(short_num(stats.makespan)) + " " + escape(o.time_unit) +
         ", mean bubble " + num(100 * stats.mean_bubble()) + "%)</text>\n";
  const double rows_y = y0 + kTitle;
  for (int st = 0; st < P; ++st) {
    const double y = rows_y + st * (o.row_height + kRowGap);
    const double mid = y + o.row_height / 2 + 4;
    svg += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(mid) + "\" text-anchor=\"end\">stage " +
           std::to_string(st) + "</text>\n";
    const auto& actions = p.schedule.stages[st];
    for (size_t k = 0; k < actions.size(); ++k) {
      const Action& a = actions[k];
      const ActionTiming& t = p.timeline.timings[st][k];
      const KindStyle s = style_of(a.kind);
      const double x = kLeft + t.start * px;
      const double w = (t.end - t.start) * px;
      const std::string tip = "<title>" + escape(to_string(a)) + ": " + escape(short_num(t.start)) + " to " +
                              escape(short_num(t.end)) + " " + escape(o.time_unit) + "</title>";
      if (!runs_compute(a.kind)) {
        if (!o.show_communication) continue;
        svg += "<rect class=\"comm\" x=\"" + num(x) + "\" y=\"" + num(y + o.row_height - kCommHeight) +
               "\" width=\"" + num(std::max(w, 1.0)) + "\" height=\"" + num(kCommHeight) + "\" fill=\"" +
               s.fill + "\">" + tip + "</rect>\n";
        continue;
      }
      svg += std::string("<rect class=\"action ") + s.letter + "\" x=\"" + num(x) + "\" y=\"" + num(y) +
             "\" width=\"" + num(w) + "\" height=\"" + num(o.row_height) + "\" fill=\"" + s.fill +
             "\" stroke=\"#FFFFFF\" stroke-width=\"0.5\">" + tip + "</rect>\n";
      const std::string label = std::to_string(a.microbatch);
      if (w >= kDigitWidth * static_cast<double>(label.size()) + 4)
        svg += "<text x=\"" + num(x + w / 2) + "\" y=\"" + num(mid) + "\" text-anchor=\"middle\" font-size=\"10\" fill=\"" +
               s.text + "\">" + label + "</text>\n";
    }
    svg += "<text x=\"" + num(o.width - kRight + 6) + "\" y=\"" + num(mid) + "\">" +
           num(100 * stats.bubble_fraction[st]) + "%</text>\n";
  }
  // The time axis under the rows.
  const double axis_y = rows_y + P * (o.row_height + kRowGap) + 2;
  svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(kLeft + plot_width) +
         "\" y2=\"" + num(axis_y) + "\" stroke=\"#000000\" stroke-width=\"1\"/>\n";
  const double step = tick_step(span, 8);
  for (int i = 0;; ++i) {
    const double t = i * step;
    if (t > span * (1 + 1e-9)) break;
    const double x = kLeft + t * px;
    svg += "<line class=\"tick\" x1=\"" + num(x) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(x) +
           "\" y2=\"" + num(axis_y + 5) + "\" stroke=\"#000000\" stroke-width=\"1\"/>\n";
    svg += "<text x=\"" + num(x) + "\" y=\"" + num(axis_y + 17) + "\" text-anchor=\"middle\" font-size=\"10\">" +
           escape(short_num(t)) + "</text>\n";
  }
  svg += "<text x=\"" + num(kLeft + plot_width + 6) + "\" y=\"" + num(axis_y + 17) + "\" font-size=\"10\">" +
         escape(o.time_unit) + "</text>\n";
  svg += "</g>\n";
}

}  // namespace

std::string timeline_svg(const std::vector<TimelinePanel>& panels, const SvgOptions& options) {
  if (panels.empty()) fail("timeline SVG: no panels to draw (valid: one or more)");
  if (!(options.width >= kLeft + kRight + 100))
    fail("timeline SVG: width ", options.width, " px (valid: ", kLeft + kRight + 100, " or more)");
  if (!(options.row_height >= 6 && options.row_height <= 1000))
    fail("timeline SVG: row_height ", options.row_height, " px (valid: 6 to 1000)");
  double longest = 0;
  std::vector<double> spans;
  for (size_t i = 0; i < panels.size(); ++i) {
    try {
      spans.push_back(timeline_stats(panels[i].schedule, panels[i].timeline).makespan);
    } catch (const Error& e) {
      fail("timeline SVG: panel ", i, " (\"", panels[i].title, "\"): ", e.what());
    }
    longest = std::max(longest, spans.back());
  }
  double height = kLegend;
  for (const auto& p : panels) height += panel_height(p, options);
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(options.width) + "\" height=\"" + num(height) +
         "\" viewBox=\"0 0 " + num(options.width) + " " + num(height) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" + num(options.width) + "\" height=\"" + num(height) +
         "\" fill=\"#FFFFFF\"/>\n";
  legend(svg);
  double y = kLegend;
  for (size_t i = 0; i < panels.size(); ++i) {
    double span = options.shared_time_scale ? longest : spans[i];
    if (!(span > 0)) span = 1;  // an empty step still gets an axis
    panel(svg, panels[i], options, y, span);
    y += panel_height(panels[i], options);
  }
  svg += "</svg>\n";
  return svg;
}

void write_timeline_svg(const std::string& path, const std::vector<TimelinePanel>& panels,
                        const SvgOptions& options) {
  const std::string svg = timeline_svg(panels, options);
  checkpoint::write_file_atomically(path, [&](std::ostream& out) { out << svg; });
}

}  // namespace sdp::pipeline
