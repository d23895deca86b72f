// Layer costs from PyTorch profiler traces (`bmpipe profile`): the Chrome trace that
// torch.profiler's export_chrome_trace writes of a few training steps, run with
// profile_memory=True and every layer's forward annotated by bmpipe.torch.annotate as
// "bmpipe.layer <index> param_bytes <bytes> params <count>" (a record_function range).
//
// Per layer and forward (a micro-batch):
//   forward      the annotation's duration; with GPU kernels in the trace, the summed durations of
//                the kernels launched inside it (matched by "External id");
//   backward     the autograd functions ("autograd::engine::evaluate_function: ...") whose
//                "Sequence number" is that of an op inside the layer's forward, summed, less the
//                recomputation inside them; kernels again where the trace has them;
//   recompute    the layer's annotations inside a backward function (a checkpointed forward run
//                again);
//   kept bytes   the device memory allocated at the forward's end less at its start ("[memory]"
//                events' "Total Allocated"; the accelerator's where the trace has them): what the
//                forward leaves allocated, its saved tensors and its output (a layer whose input
//                and output are the same size keeps exactly what it saves);
//   peak extra   the most allocated inside the forward less at its end.
// Each trace is of one recomputation option, named by the caller; a problem takes the medians.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

struct TracedLayer {
  int index = 0;
  Bytes param_bytes = 0;
  std::int64_t params = 0;
  std::vector<double> forward_s, backward_s, recompute_s;  // per forward (micro-batch) seen
  std::vector<Bytes> kept_bytes, peak_extra_bytes;
};

// The layers a trace annotates, by index (0 .. the largest annotated; every one must appear).
Result<std::vector<TracedLayer>> ReadTorchTrace(const Json& trace, const std::string& source);

// The problem of the traced layers: each trace (option name, the trace) gives every layer that
// option's costs. static_bytes: the parameters twice (weights and gradients) and
// `optimizer_bytes_per_parameter` per parameter. `base` gives the pipeline, device and p2p time
// (its layers are replaced).
struct TraceOption {
  std::string option;
  std::string source;
  Json trace;
};
Result<Problem> ProblemFromTraces(const std::vector<TraceOption>& traces, const Problem& base,
                                  double optimizer_bytes_per_parameter);

// The problem without layers that ProblemFromTraces fills: `schedule` by name (1f1b runs
// interleaved with more than one chunk), the device memory and reserve in bytes, p2p in seconds.
Result<Problem> TraceBaseProblem(int ranks, int chunks, int micro_batches, const std::string& schedule,
                                 double memory_bytes, double reserved_bytes, double p2p_s);

}  // namespace bmpipe
