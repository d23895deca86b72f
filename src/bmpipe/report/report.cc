#include "bmpipe/report/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bmpipe/core/text.h"

namespace bmpipe {
namespace {

std::string Percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

}  // namespace

std::vector<std::pair<std::string, std::string>> PlannerLines(const PlannerResult& r) {
  std::vector<std::pair<std::string, std::string>> lines;
  std::string verdict;
  switch (r.status) {
    case ModelStatus::kOptimal:
      verdict = "proven optimal";
      break;
    case ModelStatus::kFeasible:
      verdict = fmt::format("best plan found, not proven optimal: within {:.2f}% of the optimum (lower bound {}); "
                            "stopped by {}",
                            100 * r.gap, FormatDuration(static_cast<TimeNs>(std::floor(r.bound_ns))), r.stopped_by);
      break;
    case ModelStatus::kInfeasible:
      verdict = "proven: no plan fits in memory";
      break;
    case ModelStatus::kNoSolution:
      verdict = "no plan found; stopped by " + r.stopped_by;
      break;
  }
  lines.emplace_back("solver", r.solver + ": " + verdict);
  std::string search = fmt::format("{:.3f} s, {} candidate stage blocks", r.seconds, r.candidates);
  if (r.solver == "bmpipe-bnb") {
    search += fmt::format(", {} nodes, {} LP solves, {} path cuts", r.nodes, r.lp_solves, r.cuts);
  } else if (r.solver == "cbc") {
    search += fmt::format(", {} nodes", r.nodes);
  } else {
    search += fmt::format(", {} plans simulated", r.nodes);
  }
  lines.emplace_back("planning", search);
  if (r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible) {
    const double diff = r.objective_ns - static_cast<double>(r.iteration_ns);
    lines.emplace_back("objective", std::abs(diff) <= 1e-6 * static_cast<double>(r.iteration_ns)
                                        ? "equals the simulated iteration time"
                                        : fmt::format("{:.6f} s, the simulated iteration time differs by {:+.6f} s",
                                                      ToSeconds(r.objective_ns), ToSeconds(-diff)));
  }
  return lines;
}

std::string FormatReport(const ReportHeader& header, const Problem& problem, const Plan& plan, const SimResult& sim) {
  const Pipeline& p = problem.pipeline;
  std::string out = header.title + "\n";
  for (const auto& [label, value] : header.lines) out += fmt::format("  {:<10} {}\n", label, value);
  out += fmt::format("  {:<10} {}{}, {} rank{} x {} chunk{} = {} stages, {} micro-batches, {} layers\n", "pipeline",
                     ScheduleName(p.schedule),
                     !p.overlap                                          ? ""
                     : p.schedule == ScheduleKind::kInterleavedOneFOneB ? " (combined 1F1B: overlapped pairs)"
                                                                          : " (overlapped pairs)",
                     p.ranks, p.ranks == 1 ? "" : "s", p.chunks, p.chunks == 1 ? "" : "s",
                     p.stages(), p.micro_batches, problem.num_layers());
  // "of cap" and "free" are of the device's memory; plans fit in it less the headroom.
  const Bytes headroom = problem.training ? problem.training->headroom_bytes : 0;
  const Bytes device = DeviceMemoryBytes(problem);
  out += fmt::format("  {:<10} {} per rank, {} reserved{}\n\n", "device", FormatBytes(device),
                     FormatBytes(problem.reserved_bytes),
                     headroom > 0 ? fmt::format(", {} headroom kept free (plans fit in {})", FormatBytes(headroom),
                                                FormatBytes(problem.memory_bytes))
                                  : "");

  std::vector<RankIdx> over;
  for (RankIdx r = 0; r < p.ranks; ++r) {
    if (sim.ranks[r].peak_memory_bytes > sim.capacity_bytes) over.push_back(r);
  }
  out += fmt::format("Iteration time   {}\n", FormatDuration(sim.iteration_ns));
  if (over.empty()) {
    // A rank that fits by less than the cost model's memory error may not fit when it runs.
    const double error = problem.training ? problem.training->memory_error : 0;
    RankIdx fullest = 0;
    for (RankIdx r = 1; r < p.ranks; ++r) {
      if (sim.ranks[r].peak_memory_bytes > sim.ranks[fullest].peak_memory_bytes) fullest = r;
    }
    // A peak counts the reserve; the error is of the rest, the model's memory, which must fit the
    // device less the reserve (the headroom is a margin, not the limit).
    const double peak = static_cast<double>(sim.ranks[fullest].peak_memory_bytes);
    const double reserve = static_cast<double>(problem.reserved_bytes);
    const double capacity = static_cast<double>(device);
    const double usable = capacity - reserve;
    if (error > 0 && usable > 0 && (peak - reserve) * (1 + error) > usable) {
      out += fmt::format("Memory           every rank fits, but rank {} at {:.1f} % of its capacity is within the cost "
                         "model's held-out memory error (±{:.1f} %): it may not fit when run; plan and search keep "
                         "{:.1f} GB free on every rank for it by default (--memory-headroom-gb)\n",
                         fullest, 100 * peak / capacity, 100 * error, ToGigabytes(HeadroomForError(usable, error)));
    } else {
      out += "Memory           every rank fits\n";
    }
  } else {
    std::string list;
    for (RankIdx r : over) list += (list.empty() ? "" : ", ") + std::to_string(r);
    out += fmt::format("Memory           EXCEEDS capacity{} on rank{} {}\n", headroom > 0 ? " less the headroom" : "",
                       over.size() == 1 ? "" : "s", list);
  }
  if (p.overlap) {
    TimeNs least = sim.ranks.front().hidden_comm_ns, most = least;
    for (const RankResult& r : sim.ranks) {
      least = std::min(least, r.hidden_comm_ns);
      most = std::max(most, r.hidden_comm_ns);
    }
    out += fmt::format("Overlap          the pairs hide {} to {} of communication per rank under the partner's compute "
                       "(the ranks' hidden column; docs/semantics.md, \"Actions\")\n",
                       FormatDuration(least), FormatDuration(most));
  }
  out += fmt::format("Bubble ratio     {:.4f}  (1 - busiest rank's busy time / iteration time)\n", sim.bubble.ratio);
  out += fmt::format(
      "Loss vs useful   {:.4f} = ideal {:.4f} + imbalance {:.4f} + recompute {:.4f}  (fractions of useful compute)\n\n",
      sim.bubble.real, sim.bubble.ideal, sim.bubble.imbalance, sim.bubble.recompute);

  out += "Stages (per micro-batch; backward includes recompute)\n";
  out += fmt::format("{:>6} {:>5} {:>5}  {:<11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>7}  {:<24} {}\n", "stage", "rank",
                     "chunk", "layers", "forward", "backward", "recompute", "saved", "rank peak", "of cap", "options",
                     "names");
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    const StageCost c = ComputeStageCost(problem, plan, s);
    const std::string range = plan.end(s) - plan.begin(s) == 1 ? fmt::format("{}", plan.begin(s))
                                                               : fmt::format("{}-{}", plan.begin(s), plan.end(s) - 1);
    // A stage with two copies (DualPipe) runs on two ranks: "r,r'" and the larger peak.
    Bytes peak = 0;
    std::string ranks;
    for (int copy = 0; copy < p.Copies(); ++copy) {
      peak = std::max(peak, sim.ranks[p.RankOf(s, copy)].peak_memory_bytes);
      ranks += fmt::format("{}{}", copy > 0 ? "," : "", p.RankOf(s, copy));
    }
    out += fmt::format("{:>6} {:>5} {:>5}  {:<11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>7}  {:<24} {}\n", s,
                       ranks, p.ChunkOf(s), fmt::format("{} ({})", range, plan.end(s) - plan.begin(s)),
                       FormatDuration(c.forward_ns), FormatDuration(c.backward_ns), FormatDuration(c.recompute_ns),
                       FormatBytes(c.saved_bytes), FormatBytes(peak),
                       Percent(static_cast<double>(peak) / static_cast<double>(device)),
                       DescribeOptionMix(problem, plan, s), DescribeLayerNames(problem, plan.begin(s), plan.end(s)));
  }

  out += "\nRanks\n";
  out += fmt::format("{:>6} {:>11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>7} {:>10} {:>9}{}\n", "rank", "busy", "idle",
                     "recompute", "finish", "static", "peak mem", "of cap", "free", "in flight",
                     p.overlap ? fmt::format(" {:>11}", "hidden") : "");
  for (RankIdx r = 0; r < p.ranks; ++r) {
    const RankResult& rr = sim.ranks[r];
    const double utilization = static_cast<double>(rr.peak_memory_bytes) / static_cast<double>(device);
    const bool exceeds = rr.peak_memory_bytes > sim.capacity_bytes;
    const std::string free = (rr.peak_memory_bytes > device ? "-" : "") +
                             FormatBytes(rr.peak_memory_bytes > device ? rr.peak_memory_bytes - device
                                                                       : device - rr.peak_memory_bytes);
    out += fmt::format("{:>6} {:>11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>7} {:>10} {:>9}{}{}\n", r,
                       FormatDuration(rr.busy_ns), FormatDuration(sim.iteration_ns - rr.busy_ns - rr.update_ns),
                       FormatDuration(rr.recompute_ns), FormatDuration(rr.finish_ns), FormatBytes(rr.static_bytes),
                       FormatBytes(rr.peak_memory_bytes), Percent(utilization), free, rr.max_in_flight,
                       p.overlap ? fmt::format(" {:>11}", FormatDuration(rr.hidden_comm_ns)) : "",
                       exceeds ? "  OVER" : "");
  }
  return out;
}

}  // namespace bmpipe
