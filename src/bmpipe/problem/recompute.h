// What a recomputation option's name means: the one vocabulary that the cost model, the
// baselines, the targets, the exports and the MindFormers readers all read.
//
// An option reruns some parts of a decoder layer during the backward instead of keeping their
// activations from the forward (docs/semantics.md, "Recomputation options"):
//   core_attn  the attention kernel (scores, softmax and its dropout, or the fused flash kernel):
//              Megatron's `--recompute-modules core_attn`, MindFormers' select_recompute
//   attn       the whole attention block, from its norm to the output projection
//   mlp        the whole MLP block, from its norm: Megatron's `mlp` module
//   mlp_act    the MLP's activation (GeLU, or SwiGLU's SiLU and product): MindFormers'
//              select_recompute (its default patterns mlp.mul and mlp.activation_func.silu)
//   norm       the two norms, their outputs discarded after use: Megatron's `layernorm` module,
//              MindFormers' select_comm_recompute
//   mla_up_proj  latent attention's up-projections to per-head queries, keys and values, their
//              outputs discarded after use: Megatron's `mla_up_proj` module
//   full       the whole layer: only its input is kept
//   offload    beside recomputation: what the layer keeps waits in host memory, copied out during
//              the forward and back before the backward, overlapped with compute
// Names: none, selective (= core_attn), attn, mlp, mlp_act, norm, mla_up_proj, offload, full and
// '+'-joined unions of them (selective+mlp, selective+offload). The frameworks' own words are
// accepted too: MindFormers' select (= mlp_act), select_comm (= norm) and both (= mlp_act+norm);
// Megatron's core_attn, layernorm, moe (= mlp on a MoE layer: the whole MoE block) and moe_act
// (= mlp_act: also the experts' activation). Megatron's own `mlp` module is the dense MLP only and
// its `moe` module the MoE block: its readers and exports map both to mlp by the layer's kind.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/error.h"

namespace bmpipe {

enum RecomputePart : unsigned {
  kRecomputeCoreAttention = 1u << 0,
  kRecomputeAttention = 1u << 1,
  kRecomputeMlp = 1u << 2,
  kRecomputeNorms = 1u << 3,
  kRecomputeLayer = 1u << 4,
  kRecomputeMlpActivation = 1u << 5,
  // Not a recomputation: the activations the option keeps go to host memory after the forward
  // and come back before the backward (Megatron's --cpu-offloading, torch's save_on_cpu).
  kOffloadActivations = 1u << 6,
  kRecomputeMlaUpProjection = 1u << 7,
};

struct Recompute {
  unsigned parts = 0;  // RecomputePart bits; kRecomputeLayer alone when the whole layer is

  bool none() const { return parts == 0; }
  bool full() const { return parts == kRecomputeLayer; }
  bool operator==(const Recompute& other) const { return parts == other.parts; }
  bool operator!=(const Recompute& other) const { return parts != other.parts; }
};

// The meaning of an option name; an error naming the unknown part and the known names otherwise.
Result<Recompute> ParseRecompute(std::string_view name);

// The canonical name: "none", "full", or the parts joined by '+' in the order selective, attn,
// mlp, mlp_act, norm, mla_up_proj, offload ("selective+mlp").
std::string RecomputeName(Recompute recompute);

// The modules of megatron-core's fine-grained activation offloading (--offload-modules) that an
// offload option may be limited to (TrainingSetup::offload_modules): each offloads the tensors
// saved for the backward inside it, as Transformer Engine's layer spec runs it. qkv_linear: the
// attention's QKV (or latent down- and up-) projections and QK norms, with the input norm that
// Transformer Engine fuses into the QKV projection; core_attn: the attention kernel; attn_proj:
// the output projection; mlp_norm: the MoE layers' pre-MLP norm (a dense layer's is fused into
// its first linear, and Megatron skips it); expert_fc1: the experts' first GEMM; moe_act: the
// experts' activation. Megatron's attn_norm is not one: its layer spec fuses that norm, and
// Megatron skips it.
inline constexpr std::string_view kOffloadModules[] = {"qkv_linear", "core_attn",  "attn_proj",
                                                       "mlp_norm",   "expert_fc1", "moe_act"};
// Megatron offloads no tensor of fewer elements (its min_offloaded_tensor_size, 1 Mi): in bytes of
// 16-bit activations.
inline constexpr double kMinOffloadedTensorBytes = 2.0 * 1024 * 1024;

// The basic names an option may join: none, selective, attn, mlp, mlp_act, norm, mla_up_proj,
// offload, full.
std::vector<std::string> RecomputeOptionNames();

}  // namespace bmpipe
