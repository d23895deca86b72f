// bmpipe profile: a problem from PyTorch profiler traces of training steps, one per option.
#include <fmt/format.h>

#include "bmpipe/app/commands.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/invocation.h"
#include "bmpipe/core/document.h"
#include "bmpipe/frameworks/torch/profiler_trace.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe::app {
namespace {

struct ProfileRequest {
  std::vector<std::string> traces;  // OPTION=FILE
  Pipeline pipeline;                // ranks, chunks, micro-batches
  std::string schedule = "1f1b";
  double memory_gb = 0;
  double reserved_gb = 0;
  double p2p_ms = 0;
  double optimizer_bytes = 0;
  std::string out;
};

OptionTable ProfileOptions(ProfileRequest& r) {
  OptionTable t;
  t.Add("--trace", "traces", &r.traces,
        "OPTION=FILE: the option every traced layer ran (none, full, selective, ...) and its trace; once per option")
      .Required();
  t.Add("--ranks", "ranks", &r.pipeline.ranks, "Pipeline ranks to plan for").Required();
  t.Add("--micro-batches", "micro_batches", &r.pipeline.micro_batches, "Micro-batches per iteration").Required();
  t.Add("--chunks", "chunks", &r.pipeline.chunks, "Model chunks per rank (interleaved 1F1B when more than 1)")
      .ShowDefault();
  t.Add("--schedule", "schedule", &r.schedule, "Pipeline schedule (docs/semantics.md)").ShowDefault();
  t.Add("--memory-gb", "memory_gb", &r.memory_gb, "Device memory in GB").Required();
  t.Add("--reserved-gb", "reserved_gb", &r.reserved_gb, "Memory reserved on every device (framework, workspace), GB")
      .ShowDefault();
  t.Add("--p2p-ms", "p2p_ms", &r.p2p_ms, "Time to send one layer's output to the next rank, ms").ShowDefault();
  t.Add("--optimizer-bytes-per-param", "optimizer_bytes_per_param", &r.optimizer_bytes,
        "Optimizer state per parameter beside weights and gradients (12 for Adam with fp32 master weights and "
        "moments; 0 for SGD)")
      .ShowDefault();
  t.Add("--out", "", &r.out, "Write the problem here instead of printing it");
  return t;
}

Result<Output> RunProfile(const ProfileRequest& r, const Context&) {
  if (!(r.optimizer_bytes >= 0)) {
    return InvalidInput(fmt::format("--optimizer-bytes-per-param {:g}: give bytes, 0 or more (12 for Adam with fp32 "
                                    "master weights and moments)",
                                    r.optimizer_bytes));
  }
  Result<Problem> base = TraceBaseProblem(r.pipeline.ranks, r.pipeline.chunks, r.pipeline.micro_batches, r.schedule,
                                          r.memory_gb * kGigabyte, r.reserved_gb * kGigabyte, r.p2p_ms / 1e3);
  if (!base.ok()) return base.error();
  std::vector<TraceOption> traces;
  for (const std::string& trace : r.traces) {
    const std::size_t eq = trace.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == trace.size()) {
      return InvalidInput(fmt::format("--trace {}: give OPTION=FILE, the recomputation option the traced steps ran and "
                                      "the trace, e.g. none=trace.json",
                                      trace));
    }
    const std::string option = trace.substr(0, eq), path = trace.substr(eq + 1);
    if (Result<Recompute> meaning = ParseRecompute(option); !meaning.ok()) {
      return InvalidInput("--trace " + trace + ": " + meaning.error().message);
    }
    Result<Json> doc = LoadDocument(path);
    if (!doc.ok()) return doc.error();
    traces.push_back({option, path, std::move(doc).value()});
  }
  Result<Problem> problem = ProblemFromTraces(traces, base.value(), r.optimizer_bytes);
  if (!problem.ok()) return problem.error();
  Output o;
  o.json = ProblemJsonText(problem.value(), "profiled by bmpipe profile from PyTorch profiler traces");
  if (r.out.empty()) {
    o.out = o.json;
    return o;
  }
  o.files.push_back({r.out, o.json});
  o.messages.push_back(fmt::format("problem of {} layers written to {}; plan it with: bmpipe plan --problem {}",
                                   problem.value().num_layers(), r.out, r.out));
  return o;
}

}  // namespace

Command ProfileCommand() {
  return MakeCommand<ProfileRequest, ProfileOptions, RunProfile>(
      "profile",
      "Build a problem from PyTorch profiler traces (Chrome/Kineto JSON, torch.profiler's export_chrome_trace) of a "
      "few training steps, one trace per recomputation option, run with profile_memory=True and the layers "
      "annotated by bmpipe.torch.annotate: each layer's forward, backward and recomputation time (the "
      "accelerator's kernels where the trace has them) and the memory its forward leaves allocated, medians over "
      "the micro-batches traced (docs/python.md, \"From a trace\"). Prints the problem JSON, or writes it to --out.");
}

}  // namespace bmpipe::app
