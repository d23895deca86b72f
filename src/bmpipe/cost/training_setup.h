// How a model is trained: parallelism, batch, sequence and the memory-saving switches. With a
// ModelSpec and a DeviceSpec it determines every cost the planner sees.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/core/units.h"
#include "bmpipe/hardware/device.h"
#include "bmpipe/model/model.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// Upper bounds of a setup's sizes (README, "Limits"), beside the pipeline's own (problem.h).
inline constexpr int kMaxTensorParallel = 1024;
inline constexpr int kMaxDataParallel = 1 << 24;
inline constexpr int kMaxBatch = 1 << 24;       // sequences, per micro-batch or per iteration
inline constexpr int kMaxSequence = 1 << 24;    // tokens

// Number formats of the state a training run keeps.
// The linear layers' GEMM inputs: 16 bits, FP8 with a scale per tensor (Transformer Engine's
// delayed or current scaling), MXFP8: FP8 with a scale per block of 32 elements (Blackwell's
// block-scaled tensor cores), or NVFP4: 4-bit E2M1 values with an E4M3 scale per block of 16 and
// one per tensor (Transformer Engine's NVFP4BlockScaling: forward, data- and weight-gradient GEMMs
// all in FP4; Blackwell).
enum class Precision { kBf16, kFp8, kMxFp8, kNvFp4 };
enum class StateDtype { kFp32, kBf16 };      // gradients, optimizer moments
std::string_view PrecisionName(Precision p);  // "bf16", "fp8", "mxfp8", "nvfp4"
std::string_view PrecisionLabel(Precision p);  // for reports: "BF16", "FP8", "MXFP8", "NVFP4"
// The linear layers' GEMMs run quantized: FP8 (per tensor or per block) or NVFP4.
inline bool IsQuantized(Precision p) { return p != Precision::kBf16; }
inline bool IsFp4(Precision p) { return p == Precision::kNvFp4; }
// Bytes per element of a quantized tensor: FP8's 1, MXFP8's one-byte scale per 32 elements more,
// NVFP4's half byte and one-byte scale per 16.
inline double QuantizedBytesPerElement(Precision p) {
  return p == Precision::kMxFp8 ? 1 + 1.0 / 32 : p == Precision::kNvFp4 ? 0.5 + 1.0 / 16 : 1;
}
std::string_view StateDtypeName(StateDtype d);  // "fp32", "bf16"
// How MoE tokens reach their experts: Megatron's all-to-all sends every routed copy; the flex
// dispatcher (DeepEP, HybridEP) sends a token once to each other node holding one of its experts
// and fans it out over the node's links there.
enum class MoeDispatcher { kAllToAll, kFlex };
std::string_view MoeDispatcherName(MoeDispatcher d);  // "alltoall", "flex"
// How a dropless MoE router's load falls on the expert-parallel ranks: as a learned router leaves
// it (natural: the busiest rank takes kNaturalRoutingImbalance x the even share of routed
// tokens), or forced even (balanced: Megatron's --moe-router-force-load-balancing, as NVIDIA's MoE
// benchmarks run).
enum class MoeRouting { kNatural, kBalanced };
std::string_view MoeRoutingName(MoeRouting r);  // "natural", "balanced"
// Natural routing's busiest-rank load over the even share, a stated default from published
// measurements (docs/cost-model.md, data/sources/moe-routing.md): GLM-5 with 128 experts at EP 8
// wastes 18.6 % of each MoE layer's GPU time waiting for the busiest rank (about 1.23), DeepSeek's
// bias balancing holds the busiest expert within 1.04 of the mean over a validation set and an
// auxiliary loss within 1.5 to 1.7, and Megatron-Bridge's cards run natural routing 1.18 times
// slower end to end than forced balancing at most.
inline constexpr double kNaturalRoutingImbalance = 1.2;
// The inverses of the names; nullopt for any other word.
std::optional<Precision> ParsePrecision(std::string_view name);
std::optional<StateDtype> ParseStateDtype(std::string_view name);
std::optional<MoeDispatcher> ParseMoeDispatcher(std::string_view name);
std::optional<MoeRouting> ParseMoeRouting(std::string_view name);

struct TrainingSetup {
  int tp = 1;   // tensor-parallel size (within a node, as Megatron places it)
  int pp = 1;   // pipeline-parallel size: ranks of the pipeline
  int dp = 1;   // data-parallel size
  int vpp = 1;  // model chunks per pipeline rank (virtual stages); > 1 means interleaved 1F1B
  int cp = 1;   // context-parallel size: the sequence split over cp ranks (ring attention)
  int ep = 1;   // expert-parallel size: each MoE layer's routed experts split over ep ranks
  int etp = 0;  // expert tensor-parallel size; 0: the same as tp (Megatron's default)
  int micro_batch_size = 1;   // sequences per micro-batch
  int global_batch_size = 0;  // sequences per iteration, over all data-parallel replicas
  int seq = 0;                // sequence length in tokens
  bool sequence_parallel = false;
  bool flash_attention = false;
  bool distributed_optimizer = false;  // optimizer state sharded over data parallel (ZeRO-1)
  int zero = 0;  // ZeRO stage 0..3; distributed_optimizer means at least 1 (see ZeroStage)
  Precision precision = Precision::kBf16;
  // FP8 only: the linear layers' weights kept in FP8, 1 byte beside a 1-byte transpose, instead of
  // 16-bit weights and Transformer Engine's FP8 caches (Megatron's --fp8-param-gather; the
  // parameter all-gathers move FP8).
  bool fp8_params = false;
  // FP8 only: the FP8 weights' transposes are not cached across micro-batches (Megatron's
  // --disable-parameter-transpose-cache): a byte less per linear parameter, a transpose in every
  // backward.
  bool no_fp8_transpose_cache = false;
  // FP8 with a scale per tensor: Megatron's --fp8-recipe, tensorwise (current scaling, the recipe of
  // the runs the FP8 efficiency was fitted on: NVIDIA's recipes), delayed or blockwise. Costed
  // alike; the exports write it.
  std::string fp8_recipe = "tensorwise";
  StateDtype grad_dtype = StateDtype::kFp32;       // the main gradients the optimizer reads
  StateDtype optimizer_dtype = StateDtype::kFp32;  // Adam's two moments (master weights stay fp32)
  double tp_comm_overlap = 0;  // fraction of the tensor-parallel collectives hidden behind GEMMs
  bool offload_optimizer = false;  // optimizer state and step on the host (ZeRO-Offload)
  // With offload_optimizer: the fp32 master weights stay on the device too (the host steps a copy
  // and sends it back), only Adam's moments leave it: Megatron's optimizer offload without the
  // precision-aware optimizer (--offload optimizer-moments).
  bool offload_keeps_master = false;
  // At most this many decoder layers of a rank keep their activations in host memory (0: no
  // limit): what the host-memory restriction assumes. Only `validate` sets it, for a run of
  // Megatron's --cpu-offloading-num-layers, whose plan offloads exactly the first that many; the
  // planner does not count the layers it offloads.
  int offload_layers = 0;
  // What an activation offload option moves (--offload-modules): empty, everything the option
  // keeps; else only the tensors saved inside these modules of megatron-core's fine-grained
  // activation offloading (kOffloadModules), as its Transformer Engine layer spec runs them.
  std::vector<std::string> offload_modules;
  // MoE routing: 0 = dropless; else each expert takes at most capacity x its even share of tokens.
  double moe_capacity_factor = 0;
  // Dropless: the busiest expert-parallel rank's routed tokens over the even share (the critical
  // path of the grouped GEMM and the exchanges); 0 takes it from moe_routing (MoeImbalance).
  double moe_imbalance = 0;
  MoeRouting moe_routing = MoeRouting::kNatural;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // Fraction of the dispatch and combine all-to-alls hidden behind another micro-batch's compute
  // (Megatron's --overlap-moe-expert-parallel-comm, DualPipe).
  double ep_comm_overlap = 0;
  // The router and the dispatch preprocessing of every MoE layer replayed as CUDA graphs
  // (Transformer Engine graphs of scopes moe_router and moe_preprocess): the host waits
  // moe_host_graphed_ms a pass instead of moe_host_ms plus moe_host_expert_ms per local expert.
  bool moe_cuda_graphs = false;
  Bytes headroom_bytes = 0;  // memory every rank must leave free beyond the reserve (--memory-headroom-gb)
  // The schedule (pipeline.h); 1f1b runs interleaved when vpp > 1.
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  // Overlapped pairs (Pipeline::overlap): DualPipe's and DualPipeV's with DeepSeek's overlap,
  // interleaved 1F1B as Megatron's combined 1F1B (--overlap-moe-expert-parallel-comm).
  bool overlap_pairs = false;
  int micro_batch_group = 0;  // interleaved 1F1B's micro-batch groups (0: pp, Megatron's default)
  std::optional<Bytes> reserved_bytes;  // default: ReservedBytesDefault(device)
  double dp_overlap = 0;   // fraction of the data-parallel gradient sync hidden behind compute
  int devices = 0;         // if > 0, must equal tp * pp * dp
  // Recomputation options offered to the planner for each decoder layer (names from
  // RecomputeOptionNames(), or several joined by '+').
  std::vector<std::string> recompute = {"none", "selective", "attn", "mlp", "norm", "full"};
};

// The ZeRO stage the setup runs: `zero`, or 1 with the distributed optimizer.
int ZeroStage(const TrainingSetup& setup);
// Expert tensor-parallel size (etp, or tp when 0) and expert data-parallel size: the devices of
// one pipeline stage (tp x cp x dp) over ep x etp.
int ExpertTensorParallel(const TrainingSetup& setup);
int ExpertDataParallel(const TrainingSetup& setup);
// The busiest expert-parallel rank's routed tokens over the even share of a dropless MoE layer:
// moe_imbalance when given, else by moe_routing.
double MoeImbalance(const TrainingSetup& setup);

// Framework context, communication buffers and allocator fragmentation (Megatron reports about
// 5 %): 1 GiB plus 5 % of the device memory.
Bytes ReservedBytesDefault(const DeviceSpec& device);

// Micro-batches per iteration: global batch / (data-parallel size x micro-batch size).
int MicroBatches(const TrainingSetup& setup);

// The pipeline the setup implies.
Pipeline SetupPipeline(const TrainingSetup& setup);

// The run as a problem's `training` section states it (what exports and TargetRunsSetup read).
TrainingInfo SetupTrainingInfo(const ModelSpec& model, const TrainingSetup& setup);

// Checks the setup against the model and the device; messages name the flag, the value and a fix.
Status ValidateSetup(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup);

}  // namespace bmpipe
