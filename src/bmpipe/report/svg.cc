#include "bmpipe/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/schedule/schedule.h"

namespace bmpipe {
namespace {

constexpr double kWidth = 1400;
constexpr double kLeft = 90;     // rank labels
constexpr double kRight = 45;
constexpr double kLane = 16;     // one rank's op lane
constexpr double kCommStrip = 4;  // an overlapped pair's communication, along the op lane's foot
constexpr double kMemLane = 18;  // one rank's memory lane
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

Status CheckTimelineSize(const Problem& problem, int panels, const TimelineView& view) {
  const Pipeline& p = problem.pipeline;
  const std::int64_t ranks = view.ranks.empty() ? p.ranks : static_cast<std::int64_t>(view.ranks.size());
  const std::int64_t ops = p.Ops() / p.ranks * ranks * panels;
  if (ops <= kMaxTimelineOps || view.end_ns >= 0 || view.begin_ns > 0) return {};
  return InvalidInput(fmt::format("--svg: the timeline would draw {} ops, more than the {} it can show readably; draw "
                                  "a time window (--svg-window A:B, seconds) or some ranks (--svg-ranks 0-3), plan "
                                  "it for fewer micro-batches or stages, or leave out --svg",
                                  ops, kMaxTimelineOps));
}

Result<TimelineView> ParseTimelineView(const std::string& window, const std::string& ranks, const Problem& problem) {
  TimelineView view;
  if (!window.empty()) {
    const std::size_t colon = window.find(':');
    auto seconds = [&](const std::string& text, TimeNs fallback) -> std::optional<TimeNs> {
      if (text.empty()) return fallback;
      char* end = nullptr;
      const double s = std::strtod(text.c_str(), &end);
      if (end != text.c_str() + text.size() || !(s >= 0) || s > kSecondNs) return std::nullopt;
      return static_cast<TimeNs>(std::llround(s * kSecondNs));
    };
    const std::optional<TimeNs> begin = colon == std::string::npos ? std::nullopt : seconds(window.substr(0, colon), 0);
    const std::optional<TimeNs> end = colon == std::string::npos ? std::nullopt : seconds(window.substr(colon + 1), -1);
    if (!begin || !end || (*end >= 0 && *end <= *begin)) {
      return InvalidInput(fmt::format("--svg-window '{}': give START:END in seconds from the iteration's start, START "
                                      "before END (either may be left out), e.g. 10:12.5 or 30:",
                                      window));
    }
    view.begin_ns = *begin;
    view.end_ns = *end;
  }
  if (!ranks.empty()) {
    std::size_t at = 0;
    while (at <= ranks.size()) {
      const std::size_t comma = std::min(ranks.find(',', at), ranks.size());
      const std::string item = ranks.substr(at, comma - at);
      const std::size_t dash = item.find('-');
      int lo = -1, hi = -1;
      try {
        std::size_t used = 0;
        lo = std::stoi(item.substr(0, dash), &used);
        if (used != (dash == std::string::npos ? item.size() : dash)) lo = -1;
        hi = lo;
        if (dash != std::string::npos) {
          hi = std::stoi(item.substr(dash + 1), &used);
          if (used != item.size() - dash - 1) hi = -1;
        }
      } catch (const std::exception&) {
        lo = hi = -1;
      }
      if (lo < 0 || hi < lo || hi >= problem.pipeline.ranks) {
        return InvalidInput(fmt::format("--svg-ranks '{}': '{}' is not a rank or a range of ranks within 0-{}; give "
                                        "e.g. 0-3,8",
                                        ranks, item, problem.pipeline.ranks - 1));
      }
      for (int r = lo; r <= hi; ++r) {
        if (std::find(view.ranks.begin(), view.ranks.end(), r) == view.ranks.end()) view.ranks.push_back(r);
      }
      at = comma + 1;
    }
  }
  return view;
}

Result<std::string> TimelineSvg(const Problem& problem, const std::string& title, const std::vector<TimelinePanel>& panels,
                                const TimelineView& view) {
  const Pipeline& p = problem.pipeline;
  const Schedule schedule = Schedule(p);
  std::vector<RankIdx> ranks = view.ranks;
  if (ranks.empty()) {
    for (RankIdx r = 0; r < p.ranks; ++r) ranks.push_back(r);
  }
  const int lanes = static_cast<int>(ranks.size());
  TimeNs horizon = 1;
  for (const TimelinePanel& panel : panels) horizon = std::max(horizon, panel.sim.iteration_ns);
  const TimeNs begin = std::min(view.begin_ns, horizon - 1);
  const TimeNs end = view.end_ns >= 0 ? std::min(view.end_ns, horizon) : horizon;
  const bool windowed = begin > 0 || end < horizon;
  std::int64_t drawn = 0;
  for (const TimelinePanel& panel : panels) {
    for (RankIdx r : ranks) {
      for (const OpTiming& t : panel.sim.op_timing[r]) drawn += t.end_ns > begin && t.start_ns < end ? 1 : 0;
    }
  }
  if (drawn > kMaxTimelineOps) {
    return InvalidInput(fmt::format("--svg: the view would draw {} ops, more than the {} it can show readably; narrow "
                                    "--svg-window or --svg-ranks",
                                    drawn, kMaxTimelineOps));
  }
  const double scale = (kWidth - kLeft - kRight) / static_cast<double>(end - begin);
  auto x = [&](TimeNs t) { return kLeft + static_cast<double>(std::clamp(t, begin, end) - begin) * scale; };
  const double panel_height = 22 + lanes * (kLane + kGap) + 16 + lanes * (kMemLane + kGap) + 24;
  const double height = 64 + panel_height * static_cast<double>(panels.size()) + 30;

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      kWidth, height, kWidth, height);
  svg += "<defs><pattern id=\"recompute\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"4\" height=\"4\" fill=\"rgb(230,150,60)\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"4\" stroke=\"white\" stroke-width=\"1.5\"/></pattern></defs>\n";
  svg += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"white\"/>\n", kWidth, height);
  svg += fmt::format("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", Escape(title));
  std::string shown;
  if (windowed) shown += fmt::format(" {} to {}.", FormatDuration(begin), FormatDuration(end));
  if (lanes < p.ranks) shown += fmt::format(" {} of {} ranks.", lanes, p.ranks);
  svg += fmt::format(
      "<text x=\"10\" y=\"40\" fill=\"#444\">{}, {} ranks x {} chunk{}, {} micro-batches.{}</text>\n<text x=\"10\" "
      "y=\"54\" fill=\"#444\">Boxes: forward (blue) and backward (green) of one micro-batch{}, darker for later chunks, hatched orange: recomputation{}; blank: idle. "
      "Memory lanes against the capacity (red line). Hover for details.</text>\n",
      ScheduleName(p.schedule), p.ranks, p.chunks, p.chunks == 1 ? "" : "s", p.micro_batches, shown,
      p.SplitBackward() ? ", its weight gradient (amber)" : "",
      p.overlap ? "; magenta strip: an overlapped pair's all-to-all, beside the other op's compute" : "");

  double y = 64;
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
    for (int lane = 0; lane < lanes; ++lane) {
      const RankIdx r = ranks[lane];
      const double top = y + lane * (kLane + kGap);
      svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">rank {}</text>\n", kLeft - 6, top + 12, r);
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"#f2f2f2\"/>\n",
                         kLeft, top, x(sim.iteration_ns) - kLeft, kLane);
      const std::vector<Op>& ops = schedule.ops_of(r);
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const Op& op = ops[k];
        const OpTiming& t = sim.op_timing[r][k];
        if (t.end_ns <= begin || t.start_ns >= end) continue;
        const double x0 = x(t.start_ns), w = std::max(0.5, x(t.end_ns) - x0);
        const TimeNs recompute = op.kind == OpKind::kBackward ? costs[op.stage].recompute_ns : 0;
        const char* kind = op.kind == OpKind::kForward ? "forward" : op.kind == OpKind::kBackward ? "backward" : "weight gradient";
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\" "
                           "stroke=\"white\" stroke-width=\"0.3\"><title>rank {}: {} of stage {} (chunk {}), "
                           "micro-batch {}: {} to {} ({}{})</title></rect>\n",
                           x0, top, w, kLane, Fill(op.kind, p.ChunkOf(op.stage), p.chunks), r, kind, op.stage,
                           p.ChunkOf(op.stage), op.micro_batch, FormatDuration(t.start_ns), FormatDuration(t.end_ns),
                           FormatDuration(t.end_ns - t.start_ns),
                           recompute > 0 ? ", recomputation " + FormatDuration(recompute) : "");
        if (recompute > 0 && t.start_ns + recompute > begin) {
          svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"url(#recompute)\" "
                             "pointer-events=\"none\"/>\n",
                             x0, top, std::max(0.5, x(t.start_ns + recompute) - x0), kLane);
        }
        if (w >= 14) {
          svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"9\" fill=\"white\" "
                             "pointer-events=\"none\">{}</text>\n",
                             x0 + w / 2, top + 11.5, op.micro_batch);
        }
      }
      // An overlapped pair's communication beside its partner's compute: a strip along the lane's foot.
      const RankResult& rr = sim.ranks[r];
      for (const CommSpan& c : rr.pair_comm) {
        if (c.end_ns <= begin || c.start_ns >= end) continue;
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"rgb(190,60,160)\">"
                           "<title>rank {}: all-to-all of the {} of stage {}, micro-batch {}, beside the pair's other "
                           "op: {} to {} ({}), {} hidden</title></rect>\n",
                           x(c.start_ns), top + kLane - kCommStrip, std::max(0.5, x(c.end_ns) - x(c.start_ns)), kCommStrip,
                           r, c.op.kind == OpKind::kForward ? "forward" : "backward", c.op.stage, c.op.micro_batch,
                           FormatDuration(c.start_ns), FormatDuration(c.end_ns), FormatDuration(c.end_ns - c.start_ns),
                           FormatDuration(c.hidden_ns));
      }
      // Update work after the last op.
      if (rr.update_ns > 0 && rr.finish_ns > begin && rr.compute_end_ns < end) {
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"rgb(150,150,150)\">"
                           "<title>rank {}: update, {} to {}</title></rect>\n",
                           x(rr.compute_end_ns), top, std::max(0.5, x(rr.finish_ns) - x(rr.compute_end_ns)), kLane, r,
                           FormatDuration(rr.compute_end_ns), FormatDuration(rr.finish_ns));
      }
    }
    y += lanes * (kLane + kGap) + 4;
    // The lanes span the least static memory of the ranks drawn to the capacity, so that what the
    // activations add is visible.
    Bytes floor = sim.capacity_bytes;
    for (RankIdx r : ranks) floor = std::min(floor, sim.ranks[r].static_bytes);
    svg += fmt::format("<text x=\"10\" y=\"{:.1f}\" fill=\"#444\">memory (each lane from {} to the capacity {}; the "
                       "label: rank, its peak and its share of the capacity)</text>\n",
                       y + 9, FormatBytes(floor), FormatBytes(sim.capacity_bytes));
    y += 12;
    for (int lane = 0; lane < lanes; ++lane) {
      const RankIdx r = ranks[lane];
      const RankResult& rr = sim.ranks[r];
      const double top = y + lane * (kMemLane + kGap);
      const double cap = static_cast<double>(std::max(sim.capacity_bytes, peak) - floor);
      auto my = [&](Bytes b) {
        return top + kMemLane - kMemLane * std::max(0.0, static_cast<double>(b - floor)) / std::max(cap, 1.0);
      };
      svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"9\">{}: {} {:.0f}%</text>\n",
                         kLeft - 6, top + 10, r, FormatBytes(rr.peak_memory_bytes),
                         100.0 * static_cast<double>(rr.peak_memory_bytes) / static_cast<double>(sim.capacity_bytes));
      // The level at the window's start, then every step inside it.
      static const std::vector<MemoryPoint> kNone;
      const std::vector<MemoryPoint>& points = r < static_cast<RankIdx>(sim.memory.size()) ? sim.memory[r] : kNone;
      Bytes level = 0;
      std::size_t i = 0;
      for (; i < points.size() && points[i].time_ns <= begin; ++i) level = points[i].bytes;
      std::string path = fmt::format("M{:.2f},{:.2f} L{:.2f},{:.2f}", kLeft, top + kMemLane, kLeft, my(level));
      for (; i < points.size() && points[i].time_ns < end; ++i) {
        path += fmt::format(" L{:.2f},{:.2f} L{:.2f},{:.2f}", x(points[i].time_ns), my(level), x(points[i].time_ns),
                            my(points[i].bytes));
        level = points[i].bytes;
      }
      const TimeNs last = std::min(sim.iteration_ns, end);
      path += fmt::format(" L{:.2f},{:.2f} L{:.2f},{:.2f} Z", x(last), my(level), x(last), top + kMemLane);
      svg += fmt::format("<path d=\"{}\" fill=\"rgb(170,140,210)\" stroke=\"rgb(110,80,160)\" stroke-width=\"0.5\">"
                         "<title>rank {}: peak {} ({:.1f}% of {}) at {}</title></path>\n",
                         path, r, FormatBytes(rr.peak_memory_bytes),
                         100.0 * static_cast<double>(rr.peak_memory_bytes) / static_cast<double>(sim.capacity_bytes),
                         FormatBytes(sim.capacity_bytes), FormatDuration(rr.peak_time_ns));
      svg += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"red\" stroke-width=\"1\"/>\n",
                         kLeft, my(sim.capacity_bytes), x(last), my(sim.capacity_bytes));
    }
    y += lanes * (kMemLane + kGap) + 24;
  }
  // Time axis.
  const double axis = y;
  svg += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", kLeft, axis,
                     x(end), axis);
  for (int i = 0; i <= 10; ++i) {
    const TimeNs t = begin + (end - begin) * i / 10;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x(t), axis + 14, FormatDuration(t));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace bmpipe
