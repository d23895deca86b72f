// The bmpipe command line: parsing and printing only; the work happens in the libraries.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bmpipe/io/output_file.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/io/report.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

// Exit codes, in one place.
constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;  // bad command line or invalid input file
constexpr int kExitIo = 3;        // a file could not be read or written

int Fail(const Error& error) {
  std::cerr << "bmpipe: error: " << error.message << "\n";
  switch (error.kind) {
    case ErrorKind::kInvalidInput:
      return kExitBadInput;
    case ErrorKind::kIo:
      return kExitIo;
    case ErrorKind::kInternal:
      std::cerr << "bmpipe: this is a bug in bmpipe; please report it with the input that caused it\n";
      return kExitInternal;
  }
  return kExitInternal;
}

struct SimulateArgs {
  std::string problem;
  std::string plan;
  bool json = false;
  std::string out;
};

int RunSimulate(const SimulateArgs& args) {
  Result<Problem> problem = LoadProblem(args.problem);
  if (!problem.ok()) return Fail(problem.error());
  const Problem& pb = problem.value();

  Plan plan;
  SolverInfo solver{"none", SolveStatus::kFeasible, 0.0};
  std::string plan_origin;
  if (args.plan.empty()) {
    plan = EvenPlan(pb);
    plan_origin = "even split, first option of every layer (no --plan given)";
  } else {
    Result<PlanDocument> doc = LoadPlan(args.plan, pb);
    if (!doc.ok()) return Fail(doc.error());
    plan = doc.value().plan;
    if (doc.value().solver) solver = *doc.value().solver;
    plan_origin = args.plan;
  }
  Result<SimResult> sim = SimulatePlan(pb, plan);
  if (!sim.ok()) return Fail(sim.error());
  if (!sim.value().fits) solver.status = SolveStatus::kInfeasible;

  const std::string json = PlanJsonText(pb, plan, sim.value(), solver);
  if (!args.out.empty()) {
    Status written = WriteFileAtomically(args.out, json);
    if (!written.ok()) return Fail(written.error());
  }
  if (args.json) {
    std::cout << json;
  } else {
    ReportHeader header{"bmpipe simulate", {{"problem", args.problem + (pb.name.empty() ? "" : " (" + pb.name + ")")},
                                            {"plan", plan_origin}}};
    std::cout << FormatReport(header, pb, plan, sim.value());
  }
  if (!sim.value().fits) {
    std::cerr << "bmpipe: warning: the plan exceeds device memory on at least one rank (see the report)\n";
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "bmpipe: pipeline-parallel planner for LLM training. It chooses the stage partition and per-layer "
      "recomputation together, and checks every plan with an exact simulation of the pipeline schedule.\n\n"
      "Exit codes: 0 success, 1 internal error, 2 bad command line or invalid input, 3 file not readable or "
      "writable."};
  app.set_version_flag("--version", "bmpipe 0.1.0");
  app.require_subcommand(1);

  SimulateArgs sim;
  CLI::App* simulate = app.add_subcommand(
      "simulate",
      "Simulate a plan on a problem (DESIGN.md §2) and print a per-stage and per-rank report: iteration time, bubble "
      "breakdown, memory per rank over its capacity.");
  simulate->add_option("--problem", sim.problem, "Problem file (JSON or YAML, DESIGN.md §4.1)")->required();
  simulate->add_option("--plan", sim.plan,
                       "Plan file (JSON or YAML, DESIGN.md §4.2). Without it: layers split evenly, first option of "
                       "every layer.");
  simulate->add_flag("--json", sim.json, "Print the plan JSON with the simulated metrics instead of the report");
  simulate->add_option("--out", sim.out, "Also write the plan JSON with the simulated metrics to this file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  if (simulate->parsed()) return RunSimulate(sim);
  return kExitBadInput;
}

}  // namespace
}  // namespace bmpipe

int main(int argc, char** argv) { return bmpipe::Main(argc, argv); }
