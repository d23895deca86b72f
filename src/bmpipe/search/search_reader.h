// The search's options as a document states them (the Python package's bmpipe.search): the
// command line's flags as keys, lists where `search` takes lists.
#pragma once

#include <string>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/search/search.h"

namespace bmpipe {

// Keys: devices, gbs and seq (required); top, time_budget, threads, plan_count, node_limit,
// exhaustive, target, mfu_attention (causal or full); the lists tp, pp, vpp, mbs, cp, ep, etp,
// zero, precision and schedules; and the setup's switches and memory keys (setup_reader.h:
// SetupSwitchKeys, SetupMemoryKeys). Without recompute, the default options and those the target's
// settings use are offered, as `bmpipe search` does. Unknown keys are errors.
Result<SearchOptions> ReadSearchOptions(const Json& doc, const std::string& source);

}  // namespace bmpipe
