// Builders and helpers shared by the tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bmpipe/core/build.h"
#include "bmpipe/core/document.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

// At the top of a long property or scale test's body: the test is skipped in the fast tier
// (BMPIPE_FAST set, FastTier()) and runs in full otherwise (scripts/test.sh, CI).
#define BMPIPE_SLOW_TEST()                                                       \
  do {                                                                           \
    if (::bmpipe::testing::FastTier()) {                                         \
      GTEST_SKIP() << "a long property or scale test: skipped with BMPIPE_FAST"; \
    }                                                                            \
  } while (0)

namespace bmpipe::testing {

// What scales the fixed allowance (reading, building, simulating) that the time-limit tests grant
// beyond the limits they set: 3 in a sanitized build, else 1. The limits themselves do not scale.
inline constexpr double kSlowdown = kSanitizedBuild ? 3 : 1;

// Whether this run is the fast tier (`scripts/test.sh --fast`): the environment variable
// BMPIPE_FAST is set to a non-empty value other than "0".
bool FastTier();

// A pipeline of the given shape whose layers all have one option `none` with these costs.
Problem UniformProblem(ScheduleKind schedule, int ranks, int chunks, int micro_batches, int num_layers,
                       TimeNs forward_ns, TimeNs backward_ns, TimeNs p2p_ns = 0, Bytes saved_bytes = 0);

// One layer per stage: plan with stage s = layer s.
Plan OneLayerPerStage(const Problem& problem);

// A random problem and plan: 1..6 ranks, every schedule, random costs, options, p2p, transient
// and update times. Deterministic for a given generator state.
struct RandomCase {
  Problem problem;
  Plan plan;
};
RandomCase MakeRandomCase(std::mt19937_64& rng);

// Absolute path of a file in the source tree, e.g. SourcePath("examples/x.yaml").
std::string SourcePath(const std::string& relative);
std::string ReadFile(const std::string& path);
// A fresh empty directory under the system temporary directory.
std::string MakeTempDir();

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the bmpipe binary with `args` (a shell-quoted string) in directory `cwd` (default: the
// source tree, so that relative example paths in outputs do not depend on the checkout).
CommandResult RunBmpipe(const std::string& args, const std::string& cwd = "");

// Compares `actual` with the golden file tests/golden/<name>; with BMPIPE_UPDATE_GOLDEN=1 in the
// environment, rewrites the golden file instead.
::testing::AssertionResult MatchesGolden(const std::string& name, const std::string& actual);

}  // namespace bmpipe::testing
