// A training setup as a document states it: the keys of a published run (data/published-runs.yaml,
// `bmpipe validate`) and of the Python package's Problem.from_model, named as Megatron's flags
// are (tp, pp, mbs, gbs, sequence_parallel, ...).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/cost/training_setup.h"

namespace bmpipe {

// The keys ReadSetupFields reads: the parallel sizes, batch, sequence, switches, number formats,
// overlap and MoE routing.
const std::vector<std::string>& SetupFieldKeys();

// Reads those keys of the object `c` into `s`; tp, pp, dp, mbs, gbs and seq are required, the rest
// default to TrainingSetup's defaults. Fails through the cursor (inside ReadDocument).
void ReadSetupFields(const JsonCursor& c, TrainingSetup& s);

// What goes to host memory, by the command line's words (--offload): activations (offload offered
// beside every recomputation option that keeps anything), optimizer, optimizer-moments.
Status ApplyOffload(const std::vector<std::string>& what, TrainingSetup& s);

// A whole setup for the cost model (the Python package's Problem.from_model): SetupFieldKeys()
// and recompute (a list of options), schedule, micro_batch_group, reserved_gb, headroom_gb,
// offload (a list of words) and devices. Unknown keys are errors.
Result<TrainingSetup> ReadTrainingSetup(const Json& doc, const std::string& source);

}  // namespace bmpipe
