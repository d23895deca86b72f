// How a model is trained: parallelism, batch, sequence and the memory-saving switches. With a
// ModelSpec and a DeviceSpec it determines every cost the planner sees.
#pragma once

#include <optional>
#include <string>
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

struct TrainingSetup {
  int tp = 1;   // tensor-parallel size (within a node, as Megatron places it)
  int pp = 1;   // pipeline-parallel size: ranks of the pipeline
  int dp = 1;   // data-parallel size
  int vpp = 1;  // model chunks per pipeline rank (virtual stages); > 1 means interleaved 1F1B
  int micro_batch_size = 1;   // sequences per micro-batch
  int global_batch_size = 0;  // sequences per iteration, over all data-parallel replicas
  int seq = 0;                // sequence length in tokens
  bool sequence_parallel = false;
  bool flash_attention = false;
  bool distributed_optimizer = false;  // optimizer state sharded over data parallel (ZeRO-1)
  bool gpipe = false;                  // GPipe instead of (interleaved) 1F1B
  std::optional<Bytes> reserved_bytes;  // default: ReservedBytesDefault(device)
  double dp_overlap = 0;   // fraction of the data-parallel gradient sync hidden behind compute
  int devices = 0;         // if > 0, must equal tp * pp * dp
  // Recomputation options offered to the planner for each decoder layer (names from
  // RecomputeOptionNames(), or several joined by '+').
  std::vector<std::string> recompute = {"none", "selective", "attn", "mlp", "norm", "full"};
};

// Framework context, communication buffers and allocator fragmentation (Megatron reports about
// 5 %): 1 GiB plus 5 % of the device memory.
Bytes ReservedBytesDefault(const DeviceSpec& device);

// Micro-batches per iteration: global batch / (data-parallel size x micro-batch size).
int MicroBatches(const TrainingSetup& setup);

// The pipeline the setup implies.
Pipeline SetupPipeline(const TrainingSetup& setup);

// Checks the setup against the model and the device; messages name the flag, the value and a fix.
Status ValidateSetup(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup);

}  // namespace bmpipe
