// The simulated timeline as a Chrome trace (the Trace Event Format that Perfetto, chrome://tracing
// and PyTorch's profiler use), to open beside a real profile: one process per pipeline rank with a
// "compute" track of its ops (named by kind, stage and micro-batch; the recomputation at the start
// of a backward as a slice inside it; the update after the last op) and a "memory" counter
// (GB, the simulator's step function). Times in microseconds from the iteration's start.
// Deterministic bytes.
#pragma once

#include <string>

#include "bmpipe/core/error.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {

// `sim` is SimulatePlan(problem, plan) with SimOptions::record_memory; `title` goes into the
// trace's metadata.
std::string ChromeTraceJson(const Problem& problem, const Plan& plan, const SimResult& sim, const std::string& title);

// A trace holds an event per op and memory change; past this many ops the file outgrows what the
// viewers load (several GB).
inline constexpr std::int64_t kMaxTraceOps = 4'000'000;

// Fails when the trace of `problem` would hold more than kMaxTraceOps ops.
Status CheckTraceSize(const Problem& problem);

// Simulates `plan` with its memory trace and writes the trace; fails on what SimulatePlan or
// CheckTraceSize fails on.
Result<std::string> PlanChromeTrace(const Problem& problem, const Plan& plan, const std::string& title);

}  // namespace bmpipe
