// What the Megatron-LM readers share (reader.cc reads a plan, setup_reader.cc a training setup):
// the flags they know and the virtual stages the flags give.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bmpipe/frameworks/framework.h"
#include "bmpipe/frameworks/launcher_args.h"

namespace bmpipe {

// The flags the plan reader knows, with how many values each takes.
const std::map<std::string, Arity>& MegatronFlags();

// The virtual stages per pipeline rank the flags give (1 when none), as Megatron derives them from
// --pipeline-model-parallel-layout, --num-virtual-stages-per-pipeline-rank or
// --num-layers-per-virtual-pipeline-stage over `layers` decoder layers and `ranks` pipeline ranks.
int MegatronChunks(const Flags& flags, int layers, int ranks);

// The ZeRO stage the flags give: 1 with the distributed optimizer, or Megatron-FSDP's sharding
// strategy's (no_shard 0, optim 1, optim_grads 2, optim_grads_params 3), whichever is more.
int MegatronZeroStage(const Flags& flags);
// A state dtype flag (--main-grads-dtype, --exp-avg-dtype, --exp-avg-sq-dtype): "fp32" or "bf16",
// the latter only with --use-precision-aware-optimizer (Megatron refuses it otherwise).
std::string MegatronStateDtype(const Flags& flags, const std::string& name);
// --moe-expert-capacity-factor: 0 (dropless) when absent or negative, as Megatron reads it.
double MegatronCapacityFactor(const Flags& flags);
// With --fine-grained-activation-offloading: --offload-modules' values (megatron-core refuses the
// switch without them); empty without the switch.
std::vector<std::string> MegatronOffloadModules(const Flags& flags);

// ReadMegatronSetup's work, inside ReadDocument (failures through FailConfiguration): the Megatron
// argument reader and the Megatron-Bridge one, which says its fields as these flags.
LauncherSetup ReadMegatronSetupFlags(const std::string& text);

}  // namespace bmpipe
