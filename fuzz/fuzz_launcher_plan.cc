// A launcher's configuration read back as a plan (ReadLauncherPlan, frameworks/formats.h): Megatron
// arguments, the DeepSpeed module, torchtitan arguments, detected from the content as `simulate
// --plan` detects them, against a small model with its training run (4 ranks; 2 ranks x 2
// chunks; and a MoE run with the frontier setup flags). A plan the reader accepts must simulate, and its export in the same format must read
// back to the same stages and the same simulated iteration time.
#include <cstddef>
#include <cstdint>

#include "bmpipe/frameworks/formats.h"
#include "bmpipe/sim/simulator.h"
#include "fuzz_support.h"

using namespace bmpipe;

namespace {

constexpr const char* kProblem = R"(
name: launcher-small
pipeline: %s
device: {memory_bytes: 80e9, reserved_bytes: 2e9}
p2p_s: 0.0001
training: {model: small, tensor_parallel: 2, data_parallel: 2, micro_batch_size: 1, global_batch_size: 16,
           seq_length: 4096, sequence_parallel: true, distributed_optimizer: true}
layers:
  - name: embedding
    static_bytes: 1e9
    options: [{name: none, forward_s: 0.001, backward_s: 0.002, saved_bytes: 1e8}]
  - name: decoder
    repeat: 10
    static_bytes: 2e9
    options:
      - {name: none,          forward_s: 0.010, backward_s: 0.020, saved_bytes: 2e9}
      - {name: selective,     forward_s: 0.010, backward_s: 0.020, recompute_s: 0.002, saved_bytes: 1.5e9}
      - {name: mlp,           forward_s: 0.010, backward_s: 0.020, recompute_s: 0.005, saved_bytes: 1.2e9}
      - {name: selective+mlp, forward_s: 0.010, backward_s: 0.020, recompute_s: 0.007, saved_bytes: 0.7e9}
      - {name: full,          forward_s: 0.010, backward_s: 0.020, recompute_s: 0.010, saved_bytes: 1e8}
  - name: head
    static_bytes: 1e9
    options: [{name: none, forward_s: 0.002, backward_s: 0.004, saved_bytes: 2e8}]
)";

// The same layers as a run of a MoE model with context and expert parallelism, FP8, bf16 state, the
// flex dispatcher and the expert-parallel overlap: the setup flags every reader checks.
constexpr const char* kFrontierProblem = R"(
name: launcher-moe
pipeline: %s
device: {memory_bytes: 80e9, reserved_bytes: 2e9}
p2p_s: 0.0001
training: {model: small-moe, tensor_parallel: 2, data_parallel: 2, micro_batch_size: 1, global_batch_size: 16,
           seq_length: 4096, sequence_parallel: true, distributed_optimizer: true, flash_attention: true,
           context_parallel: 2, expert_parallel: 4, expert_tensor_parallel: 1, precision: fp8,
           grad_dtype: bf16, optimizer_dtype: bf16,
           moe: {experts: 8, top_k: 2, expert_ffn: 1024, dense_layers: [0], dispatcher: flex, comm_overlap: true}}
layers:
  - name: embedding
    static_bytes: 1e9
    options: [{name: none, forward_s: 0.001, backward_s: 0.002, saved_bytes: 1e8}]
  - name: decoder
    repeat: 10
    static_bytes: 2e9
    options:
      - {name: none,      forward_s: 0.010, backward_s: 0.020, saved_bytes: 2e9}
      - {name: selective, forward_s: 0.010, backward_s: 0.020, recompute_s: 0.002, saved_bytes: 1.5e9}
  - name: head
    static_bytes: 1e9
    options: [{name: none, forward_s: 0.002, backward_s: 0.004, saved_bytes: 2e8}]
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Problem problems[] = {
      fuzz::FixedProblem(kProblem, "{stages: 4, virtual_stages: 1, micro_batches: 8, schedule: 1f1b}", "small.yaml"),
      fuzz::FixedProblem(kProblem, "{stages: 2, virtual_stages: 2, micro_batches: 8, schedule: 1f1b}", "small.yaml"),
      fuzz::FixedProblem(kFrontierProblem, "{stages: 2, virtual_stages: 2, micro_batches: 8, schedule: 1f1b}",
                         "moe.yaml")};
  const std::string text = fuzz::AsText(data, size);
  const Result<PlanFormat> format = DetectPlanFormat(text);
  if (!format.ok()) return 0;
  // Plan JSON and MindFormers YAML have harnesses of their own; a CSV is not read back.
  const std::optional<FrameworkId> as = format.value().framework;
  if (!as || *as == FrameworkId::kMindFormers || *as == FrameworkId::kTorch) return 0;
  for (const Problem& problem : problems) {
    const Result<Plan> plan = ReadLauncherPlan(text, format.value(), problem, "config");
    if (!plan.ok()) continue;
    const Result<SimResult> sim = SimulatePlan(problem, plan.value());
    if (!sim.ok()) fuzz::Violation("a plan the reader accepted does not simulate: " + sim.error().message);
    const Result<std::string> exported = ExportPlan(problem, plan.value(), *as);
    if (!exported.ok()) fuzz::Violation("a plan read from a configuration does not export to it: " + exported.error().message);
    const Result<Plan> back = ReadLauncherPlan(exported.value(), format.value(), problem, "exported");
    if (!back.ok()) fuzz::Violation("the export does not read back: " + back.error().message);
    if (back.value().stage_begin != plan.value().stage_begin) fuzz::Violation("the export reads back other stages");
    if (SimulatePlan(problem, back.value()).value().iteration_ns != sim.value().iteration_ns) {
      fuzz::Violation("the export reads back to another iteration time");
    }
  }
  return 0;
}
