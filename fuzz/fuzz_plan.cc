// The plan reader (io/plan_json.h) against examples/tiny's problem, once as written (4 ranks) and
// once interleaved (2 ranks x 2 chunks); a plan it accepts is simulated and written back out as
// `simulate --json` does.
#include <cstddef>
#include <cstdint>

#include "bmpipe/io/plan_json.h"
#include "bmpipe/sim/simulator.h"
#include "fuzz_support.h"

using namespace bmpipe;

namespace {

// examples/tiny/problem.json; `%s` is its pipeline.
constexpr const char* kTinyProblem = R"({
  "name": "tiny",
  "pipeline": %s,
  "device": { "name": "toy-24gb", "memory_bytes": 16e9, "reserved_bytes": 2e9 },
  "p2p_s": 0.0005,
  "layers": [
    { "name": "embedding", "static_bytes": 3.0e9, "update_s": 0.004,
      "options": [ { "name": "none", "forward_s": 0.002, "backward_s": 0.004, "saved_bytes": 0.2e9 } ] },
    { "name": "decoder", "repeat": 10, "static_bytes": 1.2e9, "update_s": 0.002,
      "options": [
        { "name": "none",      "forward_s": 0.010, "backward_s": 0.020, "recompute_s": 0,     "saved_bytes": 1.00e9, "peak_extra_bytes": 0.5e9 },
        { "name": "selective", "forward_s": 0.010, "backward_s": 0.020, "recompute_s": 0.002, "saved_bytes": 0.60e9, "peak_extra_bytes": 0.5e9 },
        { "name": "full",      "forward_s": 0.010, "backward_s": 0.020, "recompute_s": 0.010, "saved_bytes": 0.05e9, "peak_extra_bytes": 1.0e9 } ] },
    { "name": "lm_head", "static_bytes": 3.0e9, "update_s": 0.004,
      "options": [ { "name": "none", "forward_s": 0.012, "backward_s": 0.024, "saved_bytes": 0.8e9, "peak_extra_bytes": 1.5e9 },
                   { "name": "full", "forward_s": 0.012, "backward_s": 0.024, "recompute_s": 0.012, "saved_bytes": 0.05e9, "peak_extra_bytes": 2.0e9 } ] }
  ]
})";

Problem Tiny(const std::string& pipeline) { return fuzz::FixedProblem(kTinyProblem, pipeline, "tiny.json"); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Problem problems[] = {
      Tiny(R"({ "stages": 4, "virtual_stages": 1, "micro_batches": 8, "schedule": "1f1b" })"),
      Tiny(R"({ "stages": 2, "virtual_stages": 2, "micro_batches": 4, "schedule": "1f1b" })")};
  Result<Json> doc = ParseDocument(fuzz::AsText(data, size), "plan");
  if (!doc.ok()) return 0;
  for (const Problem& problem : problems) {
    Result<PlanDocument> plan = ReadPlan(doc.value(), problem, "plan");
    if (!plan.ok()) continue;
    Result<SimResult> sim = SimulatePlan(problem, plan.value().plan);
    if (!sim.ok()) fuzz::Violation("a plan the reader accepted does not simulate: " + sim.error().message);
    const SolverInfo solver = plan.value().solver.value_or(SolverInfo("file", ModelStatus::kFeasible, 0));
    (void)PlanJsonText(problem, plan.value().plan, sim.value(), solver);
  }
  return 0;
}
