// The MindFormers pipeline-balance tool's inputs (problem/sapp_reader.h): its init YAML and its
// layer JSON, read for 4 stages x 8 micro-batches and for 2 stages x 2 chunks x 4 micro-batches
// at 56000 MB, then the even split simulated. The reader only takes a path, so the input goes
// through a scratch file.
#include <cstddef>
#include <cstdint>

#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/sapp_reader.h"
#include "bmpipe/sim/simulator.h"
#include "fuzz_support.h"

using namespace bmpipe;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::WriteScratchFile(data, size, "sapp");
  for (const SappTarget& target : {SappTarget{4, 8, 1, 56000}, SappTarget{2, 4, 2, 56000}}) {
    Result<Problem> problem = LoadSappProblem(path, target);
    if (!problem.ok()) continue;
    const Problem& p = problem.value();
    if (p.num_layers() <= 1000) (void)SimulatePlan(p, EvenPlan(p));
  }
  return 0;
}
