// Planning time and status of the planner on a grid of synthetic Llama-like models:
// layers x pipeline ranks x micro-batches, 1F1B and interleaved 1F1B (2 chunks per rank), and
// the split-backward schedules (ZB-H1 and ZB-H2 one chunk, ZB-V and interleaved ZB two).
// Prints a Markdown table (docs/planner.md has one). With --cbc it also runs CBC on the
// time-indexed integer program for the same case and prints its time and status.
//
//   build/bench/bench_planner [--time-limit S] [--cbc] [--progress] [--cbc-max-stages N] [--layers L,...]
//                             [--ranks P,...] [--factors F,...] [--schedules 1f1b,interleaved,zb-h1,...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bmpipe/report/progress_printer.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/benchmark_problem.h"
#include "bmpipe/solve/planner.h"

namespace bmpipe {
namespace {

std::vector<int> ParseList(const char* text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

std::string StatusCell(const PlannerResult& r) {
  switch (r.status) {
    case ModelStatus::kOptimal:
      return "optimal";
    case ModelStatus::kFeasible: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "gap %.2f%%", 100 * r.gap);
      return buf;
    }
    case ModelStatus::kInfeasible:
      return "no plan fits";
    case ModelStatus::kNoSolution:
      return "no plan found";
  }
  return "?";
}

int Main(int argc, char** argv) {
  double time_limit = 10;
  bool cbc = false;
  bool progress = false;  // each run's progress on standard error (JSON lines, every 0.5 s)
  int cbc_max_stages = 16;
  std::vector<int> layers = {32, 64, 96, 128}, ranks = {4, 8, 16, 32, 64}, factors = {1, 2, 8};
  std::vector<std::string> schedules = {"1f1b", "interleaved"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--time-limit" && i + 1 < argc) time_limit = std::atof(argv[++i]);
    else if (a == "--cbc") cbc = true;
    else if (a == "--progress") progress = true;
    else if (a == "--cbc-max-stages" && i + 1 < argc) cbc_max_stages = std::atoi(argv[++i]);
    else if (a == "--layers" && i + 1 < argc) layers = ParseList(argv[++i]);
    else if (a == "--ranks" && i + 1 < argc) ranks = ParseList(argv[++i]);
    else if (a == "--factors" && i + 1 < argc) factors = ParseList(argv[++i]);
    else if (a == "--schedules" && i + 1 < argc) {
      schedules.clear();
      std::stringstream ss(argv[++i]);
      std::string item;
      while (std::getline(ss, item, ',')) schedules.push_back(item);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("| schedule | layers | p | v | m | stages | ops | bmpipe time (s) | wall (s) | status | iteration (s) | nodes | cuts |%s\n",
              cbc ? " CBC time (s) | CBC status | CBC iteration (s) |" : "");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|%s\n", cbc ? "---|---|---|" : "");
  // The wall time of each run against what --time-limit promises: max(1.1 T, T + 0.2 s).
  const double allowed = std::max(1.1 * time_limit, time_limit + 0.2);
  int runs = 0, over = 0;
  double longest = 0;
  // Per schedule: the gap of every run (0 when proven), for the summary.
  std::vector<std::pair<std::string, std::vector<double>>> gaps;
  for (const std::string& schedule : schedules) {
    const std::optional<ScheduleKind> named = ScheduleFromName(schedule);
    if (!named) {
      std::fprintf(stderr, "bench_planner: unknown schedule '%s'; use %s\n", schedule.c_str(), ScheduleNames().c_str());
      return 2;
    }
    const ScheduleKind kind = *named;
    gaps.push_back({schedule, {}});
    const int chunks = TraitsOf(kind).min_chunks;
    for (int l : layers) {
      for (int p : ranks) {
        if (p * chunks > l + 2) continue;
        for (int f : factors) {
          const int m = f * p;
          Problem problem = SyntheticPlannerProblem(kind, l, p, chunks, m);
          PlannerOptions options;
          options.time_limit_s = time_limit;
          ProgressPrinter printer(std::cerr, progress ? ProgressMode::kLines : ProgressMode::kNone, "plan", 0, 0.5);
          options.progress = printer.Sink();
          const auto began = std::chrono::steady_clock::now();
          const PlannerResult r = PlanPipeline(problem, options).value();
          const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
          ++runs;
          over += wall > allowed ? 1 : 0;
          if (r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible) {
            gaps.back().second.push_back(r.status == ModelStatus::kOptimal ? 0.0 : r.gap);
          }
          longest = std::max(longest, wall);
          std::printf("| %s | %d | %d | %d | %d | %d | %d | %.3f | %.3f%s | %s | %s | %ld | %ld |", schedule.c_str(), l, p,
                      chunks, m, problem.pipeline.stages(), static_cast<int>(problem.pipeline.Ops()), r.seconds, wall,
                      wall > allowed ? " (over)" : "", StatusCell(r).c_str(),
                      r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible
                          ? std::to_string(ToSeconds(r.iteration_ns)).c_str()
                          : "-",
                      r.nodes, r.cuts);
          if (cbc) {
            if (problem.pipeline.stages() <= cbc_max_stages) {
              options.kind = PlannerKind::kCbc;
              const PlannerResult c = PlanPipeline(problem, options).value();
              std::printf(" %.3f | %s | %s |", c.seconds, StatusCell(c).c_str(),
                          c.status == ModelStatus::kOptimal || c.status == ModelStatus::kFeasible
                              ? std::to_string(ToSeconds(c.iteration_ns)).c_str()
                              : "-");
            } else {
              std::printf(" - | not run | - |");
            }
          }
          std::printf("\n");
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("\n%d runs with --time-limit %g: %d over max(1.1 T, T + 0.2 s) = %.3f s; longest %.3f s\n", runs,
              time_limit, over, allowed, longest);
  for (auto& [schedule, g] : gaps) {
    if (g.empty()) continue;
    std::sort(g.begin(), g.end());
    const long proven = std::count(g.begin(), g.end(), 0.0);
    std::printf("%s: %ld of %zu proven optimal; gap median %.2f %%, max %.2f %%\n", schedule.c_str(), proven, g.size(),
                100 * g[(g.size() - 1) / 2], 100 * g.back());
  }
  return 0;
}

}  // namespace
}  // namespace bmpipe

int main(int argc, char** argv) { return bmpipe::Main(argc, argv); }
