// Prints the cost model's per-layer predictions for GPT-22B on A100-80GB (TP 8, b 4, s 2048) next
// to Korthikanti et al. (2022) Table 4's measurements (FACTS.md), as the Markdown table in
// docs/cost-model.md, and the parameter counts of the presets against their published sizes.
//
//   build/bench/cost_model_table
#include <cstdio>
#include <string>

#include "bmpipe/cost/layer_ops.h"

namespace bmpipe {
namespace {

struct Row {
  const char* name;
  bool sequence_parallel;
  const char* option;
  double forward_ms, backward_ms;  // measured; backward includes recomputation
};

int Main() {
  const ModelSpec model = ModelPreset("gpt-22b").value();
  const DeviceSpec device = DevicePreset("a100-80gb").value();
  std::printf("| configuration | forward ms (measured) | forward ms (model) | backward ms (measured) | backward ms "
              "(model) | total ms (measured) | total ms (model) | error |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  double baseline_measured = 0, baseline_model = 0;
  for (const Row& r : {Row{"no recompute", false, "none", 7.7, 11.9}, Row{"sequence parallel", true, "none", 7.2, 11.8},
                       Row{"full recompute", false, "full", 7.7, 19.5}, Row{"selective", false, "selective", 7.7, 13.2},
                       Row{"selective + sequence parallel", true, "selective", 7.2, 13.1}}) {
    TrainingSetup s;
    s.tp = 8;
    s.micro_batch_size = 4;
    s.global_batch_size = 4;
    s.seq = 2048;
    s.sequence_parallel = r.sequence_parallel;
    const OptionCost c = EvaluateOption(DecoderLayerGraph(model, device, s, false), r.option);
    const double forward = 1e3 * c.forward_s, backward = 1e3 * (c.backward_s + c.recompute_s);
    const double measured = r.forward_ms + r.backward_ms, predicted = forward + backward;
    if (baseline_measured == 0) {
      baseline_measured = measured;
      baseline_model = predicted;
    }
    std::printf("| %s | %.1f | %.2f | %.1f | %.2f | %.1f (%+.0f %%) | %.2f (%+.0f %%) | %+.1f %% |\n", r.name,
                r.forward_ms, forward, r.backward_ms, backward, measured, 100 * (measured / baseline_measured - 1),
                predicted, 100 * (predicted / baseline_model - 1), 100 * (predicted / measured - 1));
  }
  std::printf("\n| preset | parameters (model) | published |\n|---|---|---|\n");
  struct Published {
    const char* preset;
    const char* published;
  };
  for (const Published& p : {Published{"llama2-70b", "68,976,648,192 (Hugging Face safetensors)"},
                             Published{"llama3-8b", "8,030,261,248 (Hugging Face safetensors)"},
                             Published{"llama3-70b", "70.6 B"}, Published{"llama3-405b", "405 B"},
                             Published{"gpt3-175b", "175 B"}, Published{"mixtral-8x7b", "46.7 B"},
                             Published{"nemotron-h-8b", "8 B (Nemotron-H-8B-Base-8K's card)"},
                             Published{"nemotron-h-56b", "56 B"},
                             Published{"nemotron-3-nano-30b-a3b", "31.6 B"},
                             Published{"qwen3-next-80b-a3b", "80 B, its multi-token-prediction layer aside"}}) {
    const ParameterCounts c = CountParameters(ModelPreset(p.preset).value());
    std::printf("| %s | %lld | %s |\n", p.preset, static_cast<long long>(c.total), p.published);
  }
  return 0;
}

}  // namespace
}  // namespace bmpipe

int main() { return bmpipe::Main(); }
