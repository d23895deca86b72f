// The MindFormers pipeline-balance tool's inputs (MindFormers' toolkit/pipeline_balance: its
// README and sapp/ sources; docs/exports.md), read into a Problem so that a user of that tool
// can switch in one step:
//  - its init YAML: pipeline_config (pipeline_num, num_layer, offset), recompute_config
//    (recompute, select_recompute, select_comm_recompute counts of the dry run), time_config
//    (forward time of head, one body layer, tail, in ms), memory_usage (head_memory, tail_memory
//    and body_memories.{stage_id, memories}: dry-run peaks in MB). The peaks are decomposed, as
//    the tool does, by least squares over the body stages:
//      M_s = C + n_s p + (P - s) sum_r n_{s,r} a_r
//    (C a constant per stage, p parameters per layer, a_r activations per layer and in-flight
//    micro-batch for each recompute type used), then H = M_0 - n_0 p - P sum_r n_{0,r} a_r and
//    T = M_{P-1} - n_{P-1} p - sum_r n_{P-1,r} a_r. With fewer body stages than unknowns the
//    system is under-determined and reading fails, saying how many more stages are needed.
//  - its layer JSON (layers/<model>.json: stage_const_mem and layers_description with HEAD, BODY
//    and TAIL entries).
// Times: the body's backward is (1 + c_r) x 2 x forward with the tool's default coefficients
// c = none 0, select 0.04, select_comm 0.125, both 0.165, full 0.5 (or the file's *_coef or
// *_time); head and tail backward 2 x forward. Memory: MB = 10^6 bytes. The stage constant C
// becomes the reserved memory of every rank; it is already inside the measured H and T, so the
// head and tail layers get H - C and T - C (the tool adds C to them a second time).
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// The decomposition of the dry-run peaks, in MB.
struct SappMemory {
  double constant = 0;   // C
  double parameter = 0;  // p
  std::vector<std::string> types;   // recompute types with a term: none, select, select_comm, both, full
  std::vector<double> activation;   // a_r, per type
  double head = 0, tail = 0;        // H, T
};

// The pipeline the user plans for (the tool's -s, -mb, -i, -mem).
struct SappTarget {
  int stages = 0;
  int micro_batches = 0;
  int interleave = 1;
  double memory_mb = 0;
};

Result<SappMemory> DecomposeSappMemory(const Json& init_yaml, const std::string& source);

// Reads an init YAML (with time_config) or a layer JSON, whichever `path` holds.
Result<Problem> LoadSappProblem(const std::string& path, const SappTarget& target);

}  // namespace bmpipe
