// A MindFormers configuration's pipeline lists read back as a plan (ReadMindFormersPlan,
// frameworks/mindformers/mindformers.h) against a small model shaped like examples/mindformers-demo (head, 10 decoder
// layers with the tool's recompute kinds, tail), with 4 ranks and with 2 ranks x 2 chunks. A plan
// it accepts must simulate and survive the round trip through the mindformers export.
#include <cstddef>
#include <cstdint>

#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/mindformers/mindformers.h"
#include "bmpipe/sim/simulator.h"
#include "fuzz_support.h"

using namespace bmpipe;

namespace {

constexpr const char* kDemoProblem = R"(
name: mindformers-small
pipeline: %s
device: {memory_bytes: 56000e6, reserved_bytes: 1206e6}
p2p_s: 0.001
layers:
  - name: head
    static_bytes: 4614e6
    options:
      - {name: none, forward_s: 0.090, backward_s: 0.180, saved_bytes: 0}
  - name: decoder
    repeat: 10
    static_bytes: 2217e6
    options:
      - {name: none,        forward_s: 0.090, backward_s: 0.180, recompute_s: 0,      saved_bytes: 1002e6}
      - {name: select,      forward_s: 0.090, backward_s: 0.180, recompute_s: 0.0072, saved_bytes: 783e6}
      - {name: select_comm, forward_s: 0.090, backward_s: 0.180, recompute_s: 0.0225, saved_bytes: 695e6}
      - {name: both,        forward_s: 0.090, backward_s: 0.180, recompute_s: 0.0297, saved_bytes: 423e6}
      - {name: full,        forward_s: 0.090, backward_s: 0.180, recompute_s: 0.090,  saved_bytes: 50e6}
  - name: tail
    static_bytes: 5885e6
    options:
      - {name: none, forward_s: 0.180, backward_s: 0.360, saved_bytes: 0}
)";

Problem Demo(const std::string& pipeline) { return fuzz::FixedProblem(kDemoProblem, pipeline, "mindformers-small.yaml"); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Problem problems[] = {
      Demo("{stages: 4, virtual_stages: 1, micro_batches: 8, schedule: 1f1b}"),
      Demo("{stages: 2, virtual_stages: 2, micro_batches: 4, schedule: 1f1b}")};
  Result<Json> doc = ParseDocument(fuzz::AsText(data, size), "config");
  if (!doc.ok()) return 0;
  for (const Problem& problem : problems) {
    Result<Plan> plan = ReadMindFormersPlan(doc.value(), problem, "config");
    if (!plan.ok()) continue;
    Result<SimResult> sim = SimulatePlan(problem, plan.value());
    if (!sim.ok()) fuzz::Violation("a plan the reader accepted does not simulate: " + sim.error().message);
    Result<std::string> text = ExportPlan(problem, plan.value(), FrameworkId::kMindFormers);
    if (!text.ok()) fuzz::Violation("a plan read from MindFormers lists does not export to them: " + text.error().message);
    Result<Json> exported = ParseDocument(text.value(), "exported.yaml");
    if (!exported.ok()) fuzz::Violation("the export does not parse: " + exported.error().message);
    Result<Plan> back = ReadMindFormersPlan(exported.value(), problem, "exported.yaml");
    if (!back.ok()) fuzz::Violation("the export does not read back: " + back.error().message);
    if (back.value().stage_begin != plan.value().stage_begin) fuzz::Violation("the export reads back other stages");
    if (SimulatePlan(problem, back.value()).value().iteration_ns != sim.value().iteration_ns) {
      fuzz::Violation("the export reads back to another iteration time");
    }
  }
  return 0;
}
