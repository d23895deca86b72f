#include "bmpipe/io/svg.h"

#include <algorithm>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/schedule/schedule.h"

namespace bmpipe {
namespace {

constexpr double kWidth = 1400;
constexpr double kLeft = 90;     // rank labels
constexpr double kRight = 45;
constexpr double kLane = 16;     // one rank's op lane
constexpr double kMemLane = 14;  // one rank's memory lane
constexpr double kGap = 4;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Forward blue, backward green, weight gradient amber; later chunks darker.
std::string Fill(OpKind kind, int chunk, int chunks) {
  const double t = chunks <= 1 ? 0 : static_cast<double>(chunk) / (chunks - 1);
  const int shade = static_cast<int>(40 * t);
  switch (kind) {
    case OpKind::kForward:
      return fmt::format("rgb({},{},{})", 110 - shade, 160 - shade, 220 - shade);
    case OpKind::kBackward:
      return fmt::format("rgb({},{},{})", 100 - shade, 180 - shade, 100 - shade);
    case OpKind::kWeightGrad:
      break;
  }
  return fmt::format("rgb({},{},{})", 220 - shade, 160 - shade, 60 - shade);
}

}  // namespace

Status CheckTimelineSize(const Problem& problem, int panels) {
  const std::int64_t ops = problem.pipeline.Ops() * panels;
  if (ops <= kMaxTimelineOps) return {};
  return InvalidInput(fmt::format("--svg: the timeline would draw {} ops, more than the {} it can show readably; draw "
                                  "it for fewer micro-batches or stages, or leave out --svg",
                                  ops, kMaxTimelineOps));
}

std::string TimelineSvg(const Problem& problem, const std::string& title, const std::vector<TimelinePanel>& panels) {
  const Pipeline& p = problem.pipeline;
  const Schedule schedule = Schedule(p);
  TimeNs horizon = 1;
  for (const TimelinePanel& panel : panels) horizon = std::max(horizon, panel.sim.iteration_ns);
  const double scale = (kWidth - kLeft - kRight) / static_cast<double>(horizon);
  auto x = [&](TimeNs t) { return kLeft + static_cast<double>(t) * scale; };
  const double panel_height = 22 + p.ranks * (kLane + kGap) + 16 + p.ranks * (kMemLane + kGap) + 24;
  const double height = 50 + panel_height * static_cast<double>(panels.size()) + 30;

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      kWidth, height, kWidth, height);
  svg += "<defs><pattern id=\"recompute\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"4\" height=\"4\" fill=\"rgb(230,150,60)\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"4\" stroke=\"white\" stroke-width=\"1.5\"/></pattern></defs>\n";
  svg += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"white\"/>\n", kWidth, height);
  svg += fmt::format("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", Escape(title));
  svg += fmt::format(
      "<text x=\"10\" y=\"40\" fill=\"#444\">{}, {} ranks x {} chunk{}, {} micro-batches. Boxes: forward (blue) and "
      "backward (green) of one micro-batch{}, darker for later chunks, hatched orange: recomputation; blank: idle. "
      "Memory lanes: peak over capacity (red line).</text>\n",
      ScheduleName(p.schedule), p.ranks, p.chunks, p.chunks == 1 ? "" : "s", p.micro_batches,
      p.SplitBackward() ? ", its weight gradient (amber)" : "");

  double y = 50;
  for (const TimelinePanel& panel : panels) {
    const SimResult& sim = panel.sim;
    Bytes peak = 0;
    for (const RankResult& r : sim.ranks) peak = std::max(peak, r.peak_memory_bytes);
    svg += fmt::format("<text x=\"10\" y=\"{:.1f}\" font-size=\"13\" font-weight=\"bold\">{}: iteration {}, bubble "
                       "{:.4f}, peak memory {} of {}{}</text>\n",
                       y + 14, Escape(panel.label), FormatDuration(sim.iteration_ns), sim.bubble.ratio, FormatBytes(peak),
                       FormatBytes(sim.capacity_bytes), sim.fits ? "" : " (DOES NOT FIT)");
    y += 22;
    const std::vector<StageCost> costs = ComputeStageCosts(problem, panel.plan);
    for (RankIdx r = 0; r < p.ranks; ++r) {
      const double top = y + r * (kLane + kGap);
      svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">rank {}</text>\n", kLeft - 6, top + 12, r);
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"#f2f2f2\"/>\n",
                         kLeft, top, x(sim.iteration_ns) - kLeft, kLane);
      const std::vector<Op>& ops = schedule.ops_of(r);
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const Op& op = ops[k];
        const OpTiming& t = sim.op_timing[r][k];
        const double x0 = x(t.start_ns), w = std::max(0.5, x(t.end_ns) - x0);
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\" "
                           "stroke=\"white\" stroke-width=\"0.3\"/>\n",
                           x0, top, w, kLane, Fill(op.kind, p.ChunkOf(op.stage), p.chunks));
        const TimeNs recompute = op.kind == OpKind::kBackward ? costs[op.stage].recompute_ns : 0;
        if (recompute > 0) {
          svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"url(#recompute)\"/>\n",
                             x0, top, std::max(0.5, static_cast<double>(recompute) * scale), kLane);
        }
        if (w >= 14) {
          svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"9\" fill=\"white\">{}</text>\n",
                             x0 + w / 2, top + 11.5, op.micro_batch);
        }
      }
      // Update work after the last op.
      if (sim.ranks[r].update_ns > 0) {
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"rgb(150,150,150)\"/>\n",
                           x(sim.ranks[r].compute_end_ns), top, std::max(0.5, static_cast<double>(sim.ranks[r].update_ns) * scale),
                           kLane);
      }
    }
    y += p.ranks * (kLane + kGap) + 4;
    svg += fmt::format("<text x=\"10\" y=\"{:.1f}\" fill=\"#444\">memory (lane top = capacity {})</text>\n", y + 9,
                       FormatBytes(sim.capacity_bytes));
    y += 12;
    for (RankIdx r = 0; r < p.ranks; ++r) {
      const double top = y + r * (kMemLane + kGap);
      const double cap = static_cast<double>(std::max(sim.capacity_bytes, peak));
      auto my = [&](Bytes b) { return top + kMemLane - kMemLane * static_cast<double>(b) / cap; };
      svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"9\">{} {:.0f}%</text>\n",
                         kLeft - 6, top + 10, r, 100.0 * static_cast<double>(sim.ranks[r].peak_memory_bytes) /
                                                    static_cast<double>(sim.capacity_bytes));
      std::string path = fmt::format("M{:.2f},{:.2f}", kLeft, top + kMemLane);
      Bytes level = 0;
      if (r < static_cast<RankIdx>(sim.memory.size())) {
        for (const MemoryPoint& point : sim.memory[r]) {
          path += fmt::format(" L{:.2f},{:.2f} L{:.2f},{:.2f}", x(point.time_ns), my(level), x(point.time_ns), my(point.bytes));
          level = point.bytes;
        }
      }
      path += fmt::format(" L{:.2f},{:.2f} L{:.2f},{:.2f} Z", x(sim.iteration_ns), my(level), x(sim.iteration_ns),
                          top + kMemLane);
      svg += fmt::format("<path d=\"{}\" fill=\"rgb(170,140,210)\" stroke=\"rgb(110,80,160)\" stroke-width=\"0.5\"/>\n", path);
      svg += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"red\" stroke-width=\"1\"/>\n",
                         kLeft, my(sim.capacity_bytes), x(sim.iteration_ns), my(sim.capacity_bytes));
    }
    y += p.ranks * (kMemLane + kGap) + 24;
  }
  // Time axis.
  const double axis = y;
  svg += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", kLeft, axis,
                     x(horizon), axis);
  for (int i = 0; i <= 10; ++i) {
    const TimeNs t = horizon * i / 10;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x(t), axis + 14, FormatDuration(t));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace bmpipe
