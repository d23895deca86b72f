// A lower bound on a problem's optimum from a smaller problem: the envelope problem, in which
// every layer has one option, its forward the least of its options' forwards and its backward
// the least of their backwards with recomputation, and no layer takes memory.
//
// For a fixed op order the simulated iteration time is monotone in every op's duration, and the
// order does not depend on the plan: every plan of the problem is no faster than the same
// partition in the envelope problem, so the envelope problem's optimum, and any bound on it, bounds
// the problem's. What makes it worth computing: with one option per layer identical layers merge
// into long runs and memory couples nothing, so its relaxation has a few hundred columns where the
// problem's has hundreds of thousands, and its root bound comes in seconds. Where memory does not
// bind and every layer has an option no slower than its others, the two optima are equal.
// Not with overlapped pairs, whose time also depends on how an op splits into compute and
// communication.
#pragma once

#include <optional>

#include "bmpipe/core/deadline.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// The envelope problem of a valid problem; none with overlapped pairs.
std::optional<Problem> EnvelopeProblem(const Problem& problem);

// The envelope problem's proven bound after branch and bound's root node (its family bound and
// its relaxation with path cuts), which stops cutting once the bound reaches `cutoff_ns` (> 0; a
// caller that only needs to know whether the problem can beat a plan of that time). 0 when there
// is none: overlapped pairs, or `deadline` came before the relaxation.
double EnvelopeBound(const Problem& problem, const Deadline& deadline, double cutoff_ns);

}  // namespace bmpipe
