// The analytic cost model's output: a Problem (docs/file-formats.md, "Problem") for a model, a device and a training
// setup. Layers: the embedding, every decoder layer (options from setup.recompute), and the head
// (final norm, LM head, loss, and DeepSeek-V3's multi-token-prediction modules), each with
//  - times from its op graph (layer_ops.h) on the device;
//  - static bytes = parameters on one device x bytes per parameter (mixed-precision Adam: 18, or
//    6 + 12/dp with the distributed optimizer; Megatron's theoretical_memory_usage.py);
//  - update time = the data-parallel gradient sync not hidden behind compute (ring reduce-scatter
//    of fp32 gradients and all-gather of 16-bit parameters with the distributed optimizer, else a
//    ring all-reduce) plus the optimizer step (memory-bound, 30 bytes per parameter it updates);
//  - p2p time = one activation (T x h x 2 bytes, divided by t with sequence parallelism) over the
//    link between neighbouring pipeline ranks (tp x dp devices apart, as Megatron orders ranks).
// Host memory (offloading) is not a row of the Problem, so the problem is restricted instead:
//  - optimizer offload: the host keeps, per updated parameter, the fp32 master weight, Adam's
//    moments and the gradient (HostBytesPerParameter). The setup is refused when no plan can fit:
//    when the largest layer's, or 1/pp of all layers', host state exceeds host_memory_bytes. With
//    pp > 1 a plan may still give one rank more than its share; that is not checked.
//  - activation offload: an offload option of a decoder layer kind is offered only when its host
//    bytes per micro-batch x F x N fit the host memory the optimizer's share leaves, F =
//    min(WarmupForwards(rank 0) + 1, m) the micro-batches a stage holds at most at once (the first
//    stage's: min(pp, m) with 1F1B, m with GPipe), N the most decoder layers one rank can hold
//    (every other stage holds one layer; its static memory fits the device). Any mix of the offered
//    options then fits on every rank of every plan. Each option left out is a note.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/cost/training_setup.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// Validates the model and the setup, then builds the problem. `notes`, when given, gets a sentence
// for each offload option left out for host memory.
Result<Problem> BuildProblem(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup,
                             std::vector<std::string>* notes = nullptr);

// How model FLOPs count attention: as the causal kernel runs (the masked half of the score square
// skipped; the default for MFU) or the whole square (Megatron-LM's formula, Narayanan et al.).
enum class AttentionFlops { kCausal, kFull };

// Model FLOPs of one iteration (forward and backward of every op, no recomputation), as MFU counts
// them: the op graphs on one device without any parallelism, times the global batch.
double ModelFlopsPerIteration(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup,
                              AttentionFlops attention);

// Bytes of training state per parameter on one device: the 16-bit weight, the gradient (fp32 or
// bf16), fp32 master weights and Adam's two moments (fp32 or bf16), the optimizer's part sharded
// over `shards` ranks from ZeRO-1 (or on the host when offloaded), the gradient from ZeRO-2, the
// weight from ZeRO-3. Mixed-precision Adam: 18; Megatron's distributed optimizer: 6 + 12/dp.
double BytesPerParameter(const TrainingSetup& setup, int shards);
double BytesPerParameter(const TrainingSetup& setup);  // shards: dp x cp
// Host bytes per parameter with the optimizer offloaded (0 without): the fp32 master weight, the
// two moments and the gradient the step reads, sharded over `shards` ranks from ZeRO-1.
double HostBytesPerParameter(const TrainingSetup& setup, int shards);

}  // namespace bmpipe
