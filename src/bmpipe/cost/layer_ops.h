// A layer as a graph of ops, and recomputation options as subsets of those ops.
//
// Each op has forward and backward FLOPs, the memory traffic of each pass, the tensor-parallel
// collectives it waits for, and names the tensors it reads, writes and saves for its backward.
// Its time on the device is a roofline: max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x
// efficiency)) plus its collectives. All sizes are per micro-batch on one device (tensor-parallel
// shards divided by t; with sequence parallelism the norm, dropout and residual regions too).
//
// A recomputation option is a set R of ops rerun during the backward. A tensor stays in memory
// from forward to backward iff
//   - it is not produced by an op in R, and some op saves it or an op in R reads it (R's inputs
//     are its checkpoint), or
//   - it is produced by an op in R that keeps its outputs, and an op outside R saves it
// (an op selected through the `norm` group discards its output: Megatron recomputes the norm
// output without keeping it). The option's recomputation time is R's forward time. So options
// need no formulas of their own: `selective` is the core-attention group, `full` every op, and
// any '+'-joined union of groups is an option too.
//
// Without recomputation this reproduces Korthikanti et al. (2022) Table 2 exactly for a GPT
// layer: 34 sbh + 5 a s^2 b bytes, with the tensor- and sequence-parallel divisions.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/cost/training_setup.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe {

enum class OpClass { kGemm, kFusedAttention, kElementwise };

struct OpTensor {
  std::string name;
  double bytes = 0;        // per micro-batch, on one device
  double saved_bytes = 0;  // what keeping it for the backward takes (bytes, or half when only FP8 GEMMs save it)
  int producer = -1;       // op index; -1 for the layer's input
};

struct LayerOp {
  std::string name;
  std::vector<std::string> groups;  // recomputation groups this op belongs to
  OpClass kind = OpClass::kElementwise;
  double forward_flops = 0, backward_flops = 0;
  double forward_bytes = 0, backward_bytes = 0;  // memory traffic
  double forward_comm_s = 0, backward_comm_s = 0;  // collectives the op waits for
  double hidden_forward_comm_s = 0, hidden_backward_comm_s = 0;  // collectives overlapped with the op's compute
  // Collectives overlapped with another micro-batch's pass through the layer (Megatron's MoE
  // all-to-all overlap): hidden while the layer's compute lasts, the rest on the critical path.
  double overlapped_forward_comm_s = 0, overlapped_backward_comm_s = 0;
  // The part of forward_comm_s and backward_comm_s an overlapped pair's partner can hide
  // (docs/semantics.md, "Actions"): the expert-parallel dispatch and combine.
  double pair_forward_comm_s = 0, pair_backward_comm_s = 0;
  // A quantized GEMM: FP8 (device.peak_fp8_flops x efficiency.fp8_gemm) or NVFP4
  // (device.peak_fp4_flops x efficiency.fp4_gemm), as the setup's precision says.
  bool fp8 = false;
  std::vector<int> inputs, outputs, saved;        // tensor indices
  // The module of megatron-core's fine-grained activation offloading whose region saves this op's
  // tensors (kOffloadModules, recompute.h); empty when none does.
  std::string offload_module;
  double weight_bytes = 0;                        // a GEMM's weight (0: no weight gradient)
  double forward_s = 0, backward_s = 0;           // roofline time + collectives
  double weight_grad_s = 0;                       // the weight-gradient GEMM's part of backward_s
};

struct LayerGraph {
  std::string name;
  double host_bandwidth_bytes_per_s = 0;  // device to host, with the link efficiency (offloading)
  // What an offload option moves (TrainingSetup::offload_modules): empty, all the option keeps.
  std::vector<std::string> offload_modules;
  std::vector<OpTensor> tensors;
  std::vector<LayerOp> ops;
};

// The ops of one decoder layer of a kind (model.h: its mixer, with the model's local mask when
// windowed, and its MLP, dense, MoE or none), of the embedding and of the head (final norm, LM
// head, cross-entropy loss). The bool form is attention with the MoE MLP when `moe`.
LayerGraph DecoderLayerGraph(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup,
                             const DecoderKind& kind);
LayerGraph DecoderLayerGraph(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup, bool moe,
                             bool windowed = false);
LayerGraph EmbeddingGraph(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup);
LayerGraph HeadGraph(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup);
// The head followed by the model's multi-token-prediction modules (model.h), each from the
// previous one's hidden state (the first from the head's input): embedding lookup of the next
// tokens, two norms, the 2h -> h projection, a decoder layer, and its own final norm, LM head and
// loss. HeadGraph when the model has none.
LayerGraph HeadWithMtpGraph(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup);

// The vocabulary as Megatron pads it: a multiple of 128 x tp.
int PaddedVocab(int vocab, int tp);

struct OptionCost {
  double forward_s = 0, backward_s = 0, recompute_s = 0;
  double saved_bytes = 0, peak_extra_bytes = 0;
  double host_bytes = 0;  // what waits in host memory per micro-batch (offload options)
  // What an overlapped pair can hide of forward_s, and of backward_s + recompute_s (a recomputed
  // op's forward communication with its backward's): LayerOption::forward_comm_ns.
  double forward_comm_s = 0, backward_comm_s = 0;
};
// What a split backward's W does for the layer (docs/semantics.md): the weight-gradient GEMMs
// (half of a weighted GEMM's backward compute, its collectives left in B), and what they need
// once B has run: the GEMMs' inputs as the layer keeps them and the gradients of their outputs.
// Recomputation changes neither.
struct WeightGradCost {
  double seconds = 0, bytes = 0;
};
WeightGradCost WeightGradOf(const LayerGraph& graph);

// The option's costs on `graph` (ParseRecompute must accept `option`). peak_extra is what
// the recomputed tensors occupy during the backward plus the largest tensor never saved (the
// workspace of the op that makes it).
OptionCost EvaluateOption(const LayerGraph& graph, const std::string& option);

// Collective times over n devices on a link (ring algorithms).
double AllReduceSeconds(double bytes, int n, double bandwidth_bytes_per_s, double latency_s);
double AllGatherSeconds(double bytes, int n, double bandwidth_bytes_per_s, double latency_s);

}  // namespace bmpipe
