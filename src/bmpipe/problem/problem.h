// The planner's input, independent of where the costs came from (a profile, the analytic cost
// model, the MindFormers tool's files): an ordered sequence of layers, each with its static
// memory and one or more recomputation options, the pipeline shape and the device memory.
// Semantics: docs/semantics.md. File format: docs/file-formats.md, "Problem" (read by problem_reader.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/core/units.h"
#include "bmpipe/schedule/pipeline.h"

namespace bmpipe {

using LayerIdx = int;
using OptionIdx = int;

// The sizes a problem may have (README, "Limits"), whatever it was read or built from. They keep
// the planner's and the simulator's memory bounded, and with the magnitudes below every sum of
// times or bytes they form inside int64 with margin.
inline constexpr int kMaxLayers = 100'000;
inline constexpr int kMaxOptionsPerLayer = 16;
// Bounds on the longest iteration and the fullest rank a problem can describe: the micro-batches
// times every layer's forward, backward and recompute time (plus p2p and updates), and the
// reserved, static and, with every micro-batch in flight, saved bytes of every layer.
inline constexpr TimeNs kMaxIterationNs = TimeNs{1} << 61;  // about 73 years
inline constexpr Bytes kMaxRankBytes = Bytes{1} << 61;      // about 2.3e18 bytes

struct LayerOption {
  std::string name;
  TimeNs forward_ns = 0;
  TimeNs backward_ns = 0;   // backward without recomputation
  TimeNs recompute_ns = 0;  // forward work redone during the backward
  Bytes saved_bytes = 0;    // kept from forward to backward, per micro-batch
  Bytes peak_extra_bytes = 0;  // transient while this layer's forward or backward runs
  // The part of forward_ns, and of backward_ns + recompute_ns (outside the weight gradient), that
  // waits for communication another micro-batch's compute can hide: the expert-parallel
  // all-to-all. Only an overlapped pair uses them (Pipeline::overlap, docs/semantics.md).
  TimeNs forward_comm_ns = 0;
  TimeNs backward_comm_ns = 0;
};

struct Layer {
  std::string name;
  int entry = 0;           // index of the input entry it came from (entries expand by `repeat`)
  Bytes static_bytes = 0;  // parameters, gradients, optimizer state on one device
  TimeNs update_ns = 0;    // once-per-iteration work on its rank after the last backward
  TimeNs p2p_ns = 0;       // time to send this layer's output (or its gradient) to the next rank
  // The weight-gradient part of every option's backward_ns, and what it needs once the input
  // gradient is done (inputs of the weight GEMMs, gradients of their outputs): what a split
  // backward's W runs and holds (docs/semantics.md). Recomputation changes neither.
  TimeNs weight_grad_ns = 0;
  Bytes weight_grad_bytes = 0;
  std::vector<LayerOption> options;
};

// The mixture-of-experts layers of the trained model, as a launcher needs them to build the model.
// experts == 0: a dense model.
struct MoeInfo {
  int experts = 0;            // routed experts per MoE layer
  int top_k = 0;              // experts each token is routed to
  int expert_ffn = 0;         // intermediate size of one routed expert
  int shared_expert_ffn = 0;  // intermediate size of the shared experts together; 0: none
  std::vector<int> dense_layers;  // decoder layers (0-based, ascending) with the dense MLP
  double capacity_factor = 0;     // 0: dropless; else each expert takes at most this x its even share
  std::string dispatcher = "alltoall";  // or "flex" (DeepEP): a token once to each node holding its experts
  bool comm_overlap = false;            // dispatch and combine overlapped with another micro-batch's compute
  bool cuda_graphs = false;             // the router and the dispatch preprocessing run as CUDA graphs
  bool enabled() const { return experts > 0; }
};

// What an overlap switch of a launcher hides when it is on and no fraction is known: the convention
// of data/published-runs.yaml (docs/fidelity.md), which launcher readers and profiles use too. The
// data-parallel sync of the distributed optimizer is a gradient reduce-scatter and a parameter
// all-gather: both overlapped hide all but the last bucket, about 0.9; the reduce-scatter alone
// 0.45; the all-gather alone 0.5.
inline constexpr double kDpOverlapSwitchedOn = 0.9;
inline constexpr double kDpOverlapGradReduceOnly = 0.45;
inline constexpr double kDpOverlapParamGatherOnly = 0.5;
inline constexpr double kTpCommOverlapSwitchedOn = 0.8;  // userbuffers' TP overlap
inline constexpr double kEpCommOverlapSwitchedOn = 0.8;  // --overlap-moe-expert-parallel-comm

// The training run whose costs a problem describes, when it is known (the cost model states it; a
// problem file may, under `training`): what an export needs beyond the plan to launch that run.
struct TrainingInfo {
  std::string model;           // a label, e.g. "llama3-70b"
  int tensor_parallel = 1;
  int data_parallel = 1;
  int micro_batch_size = 1;    // sequences per micro-batch
  int global_batch_size = 1;   // sequences per iteration: micro_batch_size x data_parallel x micro-batches
  int seq_length = 1;          // tokens per sequence
  bool sequence_parallel = false;
  bool distributed_optimizer = false;  // optimizer state sharded over data parallel (ZeRO-1)
  bool flash_attention = false;
  bool overlap_grad_reduce = false;    // the data-parallel gradient reduce overlaps the backward
  // (the export then also overlaps the distributed optimizer's parameter gather)
  // Written only when not the default (1, 1, 0 = tensor_parallel, 0 or 1, "bf16", false, "fp32",
  // false).
  int context_parallel = 1;
  int expert_parallel = 1;
  int expert_tensor_parallel = 0;  // 0: the same as tensor_parallel
  int zero_stage = 0;              // 0..3; distributed_optimizer means at least 1
  std::string precision = "bf16";  // "bf16", "fp8", "mxfp8" or "nvfp4"
  bool fp8_params = false;         // the weights kept in FP8 (Megatron's --fp8-param-gather)
  bool no_fp8_transpose_cache = false;  // FP8 transposes remade each backward (--disable-parameter-transpose-cache)
  std::string fp8_recipe;          // precision fp8: "tensorwise", "delayed" or "blockwise"; empty: not stated
  int mtp_layers = 0;              // multi-token-prediction modules, run in the head layer (written when > 0)
  // The megatron-core modules the offload options move the saved tensors of (TrainingSetup's
  // offload_modules; written when not empty): what Megatron's --offload-modules says.
  std::vector<std::string> offload_modules;
  // Each setting of the run with where it came from ("given", "file", "profile" or "default"), as
  // the report lists them: the cost model's command line fills it; not in problem files.
  struct Setting {
    std::string key, value, from;
  };
  std::vector<Setting> settings;
  // The cost model's held-out mean |memory error| for runs of this kind (validate.h,
  // MemoryUncertainty; 0: unknown): the report warns of a rank that fits by less. Not in files.
  double memory_error = 0;
  // The memory kept free on every rank (--memory-headroom-gb, or plan's default): the problem's
  // memory_bytes is the device's less it, the capacity plans fit in. Not in files.
  Bytes headroom_bytes = 0;
  std::string grad_dtype = "fp32", optimizer_dtype = "fp32";
  bool tp_comm_overlap = false;    // tensor-parallel collectives overlapped with GEMMs
  bool offload_optimizer = false;  // optimizer state and step on the host
  bool offload_keeps_master = false;  // the fp32 master weights stay on the device (only the moments leave)
  MoeInfo moe;                     // written only for a model with MoE layers
  // The linear-time mixers of a hybrid model's layers ("mamba2", "gated_deltanet"), in the order
  // first used; empty for attention everywhere (written only when not empty).
  std::vector<std::string> linear_mixers;
  // What the model describes but its costs leave out, a sentence each (ModelSpec::not_modeled):
  // every plan of the problem repeats them.
  std::vector<std::string> not_modeled;
};

// The ZeRO stage the run uses: zero_stage, or 1 with the distributed optimizer.
int ZeroStage(const TrainingInfo& training);

struct Problem {
  std::string name;  // optional label
  Pipeline pipeline;
  Bytes memory_bytes = 0;    // device capacity
  Bytes reserved_bytes = 0;  // framework, workspace: counted on every rank
  TimeNs p2p_ns = 0;         // default p2p time of a layer's output
  std::vector<Layer> layers;
  std::optional<TrainingInfo> training;

  int num_layers() const { return static_cast<int>(layers.size()); }
};

// The device's memory: the capacity plans fit in and the headroom kept free beyond it.
Bytes DeviceMemoryBytes(const Problem& problem);
// The memory to keep free so that a plan using the rest of `usable` bytes still fits when its
// memory is `error` (a fraction) higher than predicted: usable x error / (1 + error), rounded up
// to 0.1 GB; 0 without an error.
Bytes HeadroomForError(double usable, double error);


// Whether two layers cost the same: static bytes, update and p2p time, and every option (names
// included); the layers' own names may differ.
bool SameCosts(const Layer& a, const Layer& b);

// Checks everything a Problem built in code (not read from a file) must satisfy: the pipeline,
// non-negative costs, at least one option per layer, unique option names per layer, the sizes and
// magnitudes above.
Status ValidateProblem(const Problem& problem);

}  // namespace bmpipe
