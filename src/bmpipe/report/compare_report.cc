#include "bmpipe/report/compare_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/io/plan_json.h"

namespace bmpipe {
namespace {

Bytes MaxPeak(const SimResult& sim) {
  Bytes peak = 0;
  for (const RankResult& r : sim.ranks) peak = std::max(peak, r.peak_memory_bytes);
  return peak;
}

Bytes MinPeak(const SimResult& sim) {
  Bytes peak = sim.ranks.empty() ? 0 : sim.ranks[0].peak_memory_bytes;
  for (const RankResult& r : sim.ranks) peak = std::min(peak, r.peak_memory_bytes);
  return peak;
}

// Megatron's iteration time over this row's, when both have plans that fit.
double Speedup(const CompareRow& row, const CompareRow* megatron) {
  if (!megatron || !row.has_plan || !row.fits) return 0;
  return static_cast<double>(megatron->sim.iteration_ns) / static_cast<double>(row.sim.iteration_ns);
}

}  // namespace

double MeanMemoryUtilization(const SimResult& sim) {
  double sum = 0;
  for (const RankResult& r : sim.ranks) sum += static_cast<double>(r.peak_memory_bytes) / static_cast<double>(sim.capacity_bytes);
  return sim.ranks.empty() ? 0 : sum / static_cast<double>(sim.ranks.size());
}

std::string FormatCompare(const std::string& title, const Problem& problem, const std::vector<CompareRow>& rows) {
  const CompareRow* megatron = MegatronRow(rows);
  const Pipeline& p = problem.pipeline;
  std::string out = title + "\n";
  out += fmt::format("  pipeline   {}, {} ranks x {} chunk{}, {} micro-batches, {} layers; {} per device\n\n",
                     ScheduleName(p.schedule), p.ranks, p.chunks, p.chunks == 1 ? "" : "s", p.micro_batches,
                     problem.num_layers(), FormatBytes(problem.memory_bytes));
  out += fmt::format("{:<17} {:>11}  {:>11}  {:<30} {:>21} {:>15} {:>5} {:>10}\n", "planner", "iteration", "vs megatron",
                     "loss = ideal + imbal + recomp", "peak mem max / min", "mem use max/avg", "fits", "planning");
  for (const CompareRow& row : rows) {
    if (!row.applicable) {
      out += fmt::format("{:<17} {:>11}  {:>11}  {:<30} {:>21} {:>15} {:>5} {:>10}\n", row.name, "n/a", "", "", "", "",
                         "", fmt::format("{:.3f} s", row.seconds));
      continue;
    }
    if (!row.has_plan) {
      out += fmt::format("{:<17} {:>11}  {:>11}  {:<30} {:>21} {:>15} {:>5} {:>10}\n", row.name, "no plan", "", "", "",
                         "", "no", fmt::format("{:.3f} s", row.seconds));
      continue;
    }
    const Bubble& b = row.sim.bubble;
    const double speedup = Speedup(row, megatron);
    out += fmt::format(
        "{:<17} {:>11}  {:>11}  {:<30} {:>21} {:>15} {:>5} {:>10}\n", row.name, FormatDuration(row.sim.iteration_ns),
        speedup > 0 ? fmt::format("{:.3f}x", speedup) : "-",
        fmt::format("{:.4f} = {:.4f} + {:.4f} + {:.4f}", b.real, b.ideal, b.imbalance, b.recompute),
        FormatBytes(MaxPeak(row.sim)) + " / " + FormatBytes(MinPeak(row.sim)),
        fmt::format("{:.1f}%/{:.1f}%", 100.0 * static_cast<double>(MaxPeak(row.sim)) / static_cast<double>(row.sim.capacity_bytes),
                    100.0 * MeanMemoryUtilization(row.sim)),
        row.fits ? "yes" : "NO", fmt::format("{:.3f} s", row.seconds));
  }
  out += "\nHow each planner chose (\"vs megatron\": Megatron's best time over this one; loss as fractions of useful compute):\n";
  for (const CompareRow& row : rows) {
    out += fmt::format("  {:<17} {}{}\n", row.name, row.applicable ? "" : "not applicable: ", row.note);
  }
  if (!megatron) {
    const bool runs = std::any_of(rows.begin(), rows.end(),
                                  [](const CompareRow& r) { return r.name == "megatron" && r.applicable; });
    out += runs ? "  (no Megatron configuration fits, so there is no speed-up column)\n"
                : "  (Megatron does not run this pipeline, so there is no speed-up column)\n";
  }
  return out;
}

Json CompareToJson(const Problem& problem, const std::vector<CompareRow>& rows) {
  const CompareRow* megatron = MegatronRow(rows);
  Json out = Json::array();
  for (const CompareRow& row : rows) {
    Json j = Json::object();
    j["name"] = row.name;
    j["applicable"] = row.applicable;
    j["feasible"] = row.has_plan && row.fits;
    j["planning_time_s"] = row.seconds;
    j["config"] = row.note;
    if (!row.status.empty()) j["status"] = row.status;
    if (row.has_plan) {
      j["iteration_time_s"] = ToSeconds(row.sim.iteration_ns);
      const double speedup = Speedup(row, megatron);
      if (speedup > 0) j["speedup_vs_megatron"] = speedup;
      Json peaks = Json::array();
      for (const RankResult& r : row.sim.ranks) peaks.push_back(r.peak_memory_bytes);
      j["peak_memory_bytes"] = std::move(peaks);
      j["memory_utilization_max"] = static_cast<double>(MaxPeak(row.sim)) / static_cast<double>(row.sim.capacity_bytes);
      j["memory_utilization_mean"] = MeanMemoryUtilization(row.sim);
      const Bubble& b = row.sim.bubble;
      j["bubble"] = {{"ratio", b.ratio}, {"real", b.real}, {"ideal", b.ideal}, {"imbalance", b.imbalance}, {"recompute", b.recompute}};
      const SolverInfo solver{row.name, row.fits ? ModelStatus::kFeasible : ModelStatus::kInfeasible, row.seconds};
      j["plan"] = PlanToJson(problem, row.plan, row.sim, solver);
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace bmpipe
