// The plan file (docs/file-formats.md, "Plan"): written with the simulator's metrics, read back for `simulate`
// and the exporters. Metrics in a file being read are ignored: the simulator recomputes them.
#pragma once

#include <optional>
#include <string>

#include "bmpipe/core/document.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {

struct PlanDocument {
  Plan plan;
  std::optional<SolverInfo> solver;  // when the file has a "solver" object
};

// Reads a plan for `problem`; rejects plans that do not cover the layers contiguously, name an
// unknown option, or have the wrong number of stages.
Result<PlanDocument> ReadPlan(const Json& doc, const Problem& problem, const std::string& source);
// The plan file at `path` (a framework's configuration: frameworks/formats.h, LoadAnyPlan).
Result<PlanDocument> LoadPlan(const std::string& path, const Problem& problem);

// The plan file's fields plus metrics: per-stage costs, per-rank memory and time, bubble.
Json PlanToJson(const Problem& problem, const Plan& plan, const SimResult& sim, const SolverInfo& solver);

// PlanToJson, dumped with two-space indentation and a final newline.
std::string PlanJsonText(const Problem& problem, const Plan& plan, const SimResult& sim, const SolverInfo& solver);

}  // namespace bmpipe
