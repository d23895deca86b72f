// The analytic cost model's output: a Problem (DESIGN §4.1) for a model, a device and a training
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
#pragma once

#include <string>
#include <vector>

#include "bmpipe/cost/training_setup.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// Validates the model and the setup, then builds the problem.
Result<Problem> BuildProblem(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup);

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

}  // namespace bmpipe
