// What the Megatron-LM readers share (reader.cc reads a plan, setup_reader.cc a training setup):
// the flags they know and the virtual stages the flags give.
#pragma once

#include <map>
#include <string>

#include "bmpipe/frameworks/framework.h"
#include "bmpipe/frameworks/launcher_args.h"

namespace bmpipe {

// The flags the plan reader knows, with how many values each takes.
const std::map<std::string, Arity>& MegatronFlags();

// The virtual stages per pipeline rank the flags give (1 when none), as Megatron derives them from
// --pipeline-model-parallel-layout, --num-virtual-stages-per-pipeline-rank or
// --num-layers-per-virtual-pipeline-stage over `layers` decoder layers and `ranks` pipeline ranks.
int MegatronChunks(const Flags& flags, int layers, int ranks);

// ReadMegatronSetup's work, inside ReadDocument (failures through FailConfiguration): the Megatron
// argument reader and the Megatron-Bridge one, which says its fields as these flags.
LauncherSetup ReadMegatronSetupFlags(const std::string& text);

}  // namespace bmpipe
