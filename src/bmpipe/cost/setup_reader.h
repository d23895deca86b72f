// A training setup as a run table states it: the keys of a published run (data/published-runs.yaml,
// `bmpipe validate`, `bmpipe calibrate`), named as Megatron's flags are (tp, pp, mbs, gbs,
// sequence_parallel, ...). The command line's and the Python package's setup options are the
// option table of app/model.h, with the same names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/cost/training_setup.h"

namespace bmpipe {

// The keys of the parallel layout, batch and sequence: tp, pp, dp, vpp, cp, ep, etp, mbs, gbs, seq,
// sequence_parallel, distributed_optimizer, zero, precision (what `search` varies, but gbs and seq).
const std::vector<std::string>& SetupLayoutKeys();
// The keys of the costs' switches: flash attention, FP8 parameters, state dtypes, overlap,
// optimizer offload and MoE routing.
const std::vector<std::string>& SetupSwitchKeys();
// Both.
const std::vector<std::string>& SetupFieldKeys();

// Reads those keys of the object `c` into `s`: in the layout, tp, pp, dp, mbs, gbs and seq are
// required; the rest default to TrainingSetup's defaults. Fail through the cursor (inside
// ReadDocument).
void ReadSetupLayout(const JsonCursor& c, TrainingSetup& s);
void ReadSetupSwitches(const JsonCursor& c, TrainingSetup& s);
void ReadSetupFields(const JsonCursor& c, TrainingSetup& s);  // both

// What goes to host memory, by the command line's words (--offload): activations (offload offered
// beside every recomputation option that keeps anything), optimizer, optimizer-moments.
Status ApplyOffload(const std::vector<std::string>& what, TrainingSetup& s);

}  // namespace bmpipe
