// The problem reader (problem/problem_reader.h) on a JSON or YAML problem file, then what the
// command line does with a problem it read: write it (`plan --dump-problem`), which must read
// back to the same file, and simulate the even split (`simulate --problem`) when it is small.
#include <cstddef>
#include <cstdint>

#include "bmpipe/io/problem_json.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/sim/simulator.h"
#include "fuzz_support.h"

using namespace bmpipe;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Result<Json> doc = ParseDocument(fuzz::AsText(data, size), "problem");
  if (!doc.ok()) return 0;
  Result<Problem> problem = ReadProblem(doc.value(), "problem");
  if (!problem.ok()) return 0;
  const Problem& p = problem.value();

  const std::string written = ProblemJsonText(p, "");
  Result<Json> again = ParseDocument(written, "written.json");
  if (!again.ok()) fuzz::Violation("the written problem does not parse: " + again.error().message);
  Result<Problem> reread = ReadProblem(again.value(), "written.json");
  if (!reread.ok()) fuzz::Violation("the written problem does not read back: " + reread.error().message);
  if (ProblemJsonText(reread.value(), "") != written) fuzz::Violation("the written problem reads back different");

  const long ops = static_cast<long>(p.pipeline.stages()) * p.pipeline.micro_batches;
  if (p.num_layers() <= 1000 && ops <= 20000) (void)SimulatePlan(p, EvenPlan(p));
  return 0;
}
